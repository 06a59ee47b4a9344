/**
 * One error family for the whole toolkit. Every error has a stable `code` (safe to match on),
 * a `hint` that tells the user what to do, an optional `cause`, and `retryable`, which the
 * tool router reads to decide whether a retry can help.
 *
 * Checks use {@link isAgentError} rather than `instanceof`, because a process can hold two
 * copies of this package (a tool module bundling its own); the brand survives that.
 */
const BRAND = Symbol.for('agentic-rl-toolkit.AgentError');

import type { ErrorCode } from './error-codes.js';

export type { ErrorCode } from './error-codes.js';

/** One located problem in a JSON document. `pointer` is an RFC 6901 JSON pointer into the instance. */
export interface Issue {
  /** JSON pointer of the offending value ("" is the whole document). */
  readonly pointer: string;
  /** What is wrong, in words. */
  readonly message: string;
  /** File the document came from, when it came from a file. */
  readonly file?: string;
  /** JSON pointer into the schema that rejected the value, when a schema did. */
  readonly schemaPath?: string;
  /** The offending value (JSON), when the document was at hand. */
  readonly value?: unknown;
}

export interface AgentErrorOptions {
  readonly hint?: string;
  readonly cause?: unknown;
  readonly retryable?: boolean;
}

/** The toolkit's error: a code, a message naming what is wrong, and a hint saying what to do. */
export class AgentError extends Error {
  readonly [BRAND] = true;
  readonly code: ErrorCode;
  readonly hint: string;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: AgentErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.hint = options.hint ?? '';
    this.retryable = options.retryable ?? false;
  }

  /** A plain-object form for event logs and JSON output. */
  toJSON(): Record<string, unknown> {
    return { name: this.name, code: this.code, message: this.message, hint: this.hint || undefined, retryable: this.retryable };
  }
}

/** Total: a Proxy whose traps throw is simply not an AgentError. */
export function isAgentError(value: unknown): value is AgentError {
  if (typeof value !== 'object' || value === null) return false;
  try {
    return (value as Record<symbol, unknown>)[BRAND] === true;
  } catch {
    return false;
  }
}

function attempt<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/**
 * Any thrown value in words: `Name: message` for errors, the value itself for primitives, JSON for
 * plain objects. Total: it never throws, whatever getters, prototype or Proxy traps the value has,
 * because a tool may throw anything and a formatter that throws turns one failed call into a
 * crashed run.
 */
export function describeError(value: unknown, options: { readonly stack?: boolean } = {}): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value !== 'object' && typeof value !== 'function') return attempt(() => String(value)) ?? 'an unprintable value';
  const text = (read: () => unknown): string | undefined => {
    const v = attempt(read);
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  const obj = value as { name?: unknown; message?: unknown; stack?: unknown };
  if (options.stack) {
    const stack = text(() => obj.stack);
    if (stack) return stack;
  }
  const message = text(() => obj.message);
  const name = text(() => obj.name);
  if (message !== undefined) return name ? `${name}: ${message}` : message;
  const json = text(() => JSON.stringify(value));
  if (json !== undefined && json !== '{}') return json;
  return name ?? text(() => Object.prototype.toString.call(value)) ?? 'an unprintable value';
}

/** A user-facing input error: bad flags, a bad env folder, an invalid action. Exit code 2 at the CLI. */
export class UsageError extends AgentError {
  constructor(message: string, hint = '') {
    super('BAD_USAGE', message, { hint });
  }
}

/** A document (definition, params, state, reward) failed validation. Carries every issue found. */
export class ValidationError extends AgentError {
  readonly issues: readonly Issue[];

  constructor(
    code: Extract<ErrorCode, 'DEFINITION_INVALID' | 'PARAMS_INVALID' | 'STATE_INVALID' | 'REWARD_INVALID'>,
    what: string,
    issues: readonly Issue[],
    hint: string,
  ) {
    super(code, `${what}:\n${formatIssues(issues)}`, { hint });
    this.issues = issues;
  }

  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), issues: this.issues };
  }
}

/** Validation issues as lines of text, one per issue with its JSON pointer, at most `limit`. */
export function formatIssues(issues: readonly Issue[], limit = 20): string {
  const lines = issues.slice(0, limit).map((i) => {
    const where = `${i.file ? `${i.file} ` : ''}${i.pointer === '' ? '(root)' : i.pointer}`;
    return `  - ${where}: ${i.message}`;
  });
  if (issues.length > limit) lines.push(`  … and ${issues.length - limit} more`);
  return lines.join('\n');
}

/** A tool call failed. `tool` names the tool; `retryable` tells the retry policy whether to try again. */
export class ToolError extends AgentError {
  readonly tool: string;
  /** For a result that breaks a declared schema (an MCP tool's outputSchema): where, and what. */
  readonly issues?: readonly Issue[];

  constructor(
    code: Extract<ErrorCode, 'TOOL_FAILED' | 'TOOL_CRASHED' | 'TOOL_TIMEOUT' | 'TOOL_MALFORMED_OUTPUT' | 'TOOL_OUTPUT_TOO_LARGE' | 'TOOL_CONTRACT' | 'TOOL_CIRCUIT_OPEN' | 'TOOL_CANCELLED' | 'TOOL_NOT_FOUND'>,
    tool: string,
    message: string,
    options: AgentErrorOptions & { readonly issues?: readonly Issue[] } = {},
  ) {
    super(code, `tool '${tool}': ${message}`, options);
    this.tool = tool;
    if (options.issues) this.issues = options.issues;
  }

  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), tool: this.tool };
  }
}

/**
 * A multi-line message on one line, keeping its cause: the first line says what failed, the last
 * usually why (a traceback's `KeyError: 'balance'`, a schema issue's pointer and reason).
 */
export function oneLine(message: string, max = 300): string {
  const lines = message.split('\n').map((l) => l.trim().replace(/^- /, '')).filter((l) => l !== '');
  const kept = lines.length <= 3 ? lines : [lines[0], lines[1], '…', lines[lines.length - 1]];
  const text = kept.join(' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

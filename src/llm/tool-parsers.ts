/**
 * Tool calls read from a model's generated text, as vLLM's tool parsers of the same names read
 * them (`--tool-call-parser hermes`, `llama3_json`):
 * - `hermes`: `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, one or several; the text
 *   before the first is the turn's content (Qwen 2.5/3, Hermes and most tool-tuned open models);
 * - `llama3_json`: the whole turn is one JSON object `{"name": …, "parameters": {…}}` (or several
 *   separated by `;`), optionally after `<|python_tag|>` (Llama 3.1–3.3); other text is content.
 * A call that cannot be read (bad JSON, no name, arguments that are not an object) makes the turn
 * invalid, with the reason: never a crash, and never a guess.
 */
import type { JsonObject } from '../shared/json.js';

/** What a turn's text says: its content, its calls, and why it is invalid when a call cannot be read. */
export interface ParsedTurn {
  readonly content: string;
  readonly calls: readonly { readonly name: string; readonly arguments: JsonObject }[];
  /** Why the text parses as no valid call (then `calls` is empty). */
  readonly invalid?: string;
}

export type ToolParser = (text: string) => ParsedTurn;

/** The parsers by vLLM's names. */
export const TOOL_PARSERS: Readonly<Record<string, ToolParser>> = {
  hermes: parseHermes,
  llama3_json: parseLlama3Json,
};

/** The parser of that name; undefined for an unknown name. */
export function toolParser(name: string): ToolParser | undefined {
  return Object.hasOwn(TOOL_PARSERS, name) ? TOOL_PARSERS[name] : undefined;
}

const HERMES_OPEN = '<tool_call>';
const HERMES_CLOSE = '</tool_call>';

function parseHermes(text: string): ParsedTurn {
  const first = text.indexOf(HERMES_OPEN);
  if (first === -1) return { content: text, calls: [] };
  const content = text.slice(0, first).trim();
  const calls: { name: string; arguments: JsonObject }[] = [];
  for (let at = first; at !== -1; ) {
    const start = at + HERMES_OPEN.length;
    const end = text.indexOf(HERMES_CLOSE, start);
    // vLLM takes an unclosed last block as running to the end of the text (the model stopped on its end-of-turn token).
    const body = text.slice(start, end === -1 ? undefined : end);
    const call = readCall(body, 'arguments');
    if (typeof call === 'string') return { content, calls: [], invalid: `tool call ${calls.length + 1}: ${call}` };
    calls.push(call);
    at = end === -1 ? -1 : text.indexOf(HERMES_OPEN, end + HERMES_CLOSE.length);
  }
  return { content, calls };
}

function parseLlama3Json(text: string): ParsedTurn {
  const body = text.replace(/^\s*<\|python_tag\|>/, '').trim();
  if (!body.startsWith('{')) return { content: text, calls: [] };
  const calls: { name: string; arguments: JsonObject }[] = [];
  for (const part of splitTopLevel(body, ';')) {
    const call = readCall(part, 'parameters');
    if (typeof call === 'string') return { content: '', calls: [], invalid: `tool call ${calls.length + 1}: ${call}` };
    calls.push(call);
  }
  return { content: '', calls };
}

/** One call's JSON, or why it is not one. `argsKey` is the parser's name for the arguments; `arguments` is read too. */
function readCall(body: string, argsKey: 'arguments' | 'parameters'): { name: string; arguments: JsonObject } | string {
  let value: unknown;
  try {
    value = JSON.parse(body.trim());
  } catch (err) {
    return `not JSON (${(err as Error).message})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object';
  const obj = value as Record<string, unknown>;
  if (typeof obj['name'] !== 'string' || obj['name'] === '') return "no 'name'";
  let args: unknown = obj[argsKey] ?? obj['arguments'] ?? {};
  // Some models write the arguments as a JSON string, as OpenAI's API carries them.
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args) as unknown;
    } catch {
      return `'${argsKey}' is a string that is not JSON`;
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return `'${argsKey}' is not an object`;
  return { name: obj['name'], arguments: args as JsonObject };
}

/** `a; b` split at separators outside strings, braces and brackets. */
function splitTopLevel(text: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let inString = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === sep && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

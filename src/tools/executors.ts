/**
 * Executors run one attempt of a tool call and return its raw result. The router wraps them
 * in the resilience policies and checks the result against the handler contract.
 *
 * Subprocess and HTTP tools speak the same JSON both ways. Request:
 *   {"tool": "...", "params": {...}, "state": {...}, "trace_id": "...", "instance_id": "...", "attempt": 1}
 * Response: {"observation": ..., "patch": [...], "rewards": {...}, "done": false}
 *   or {"error": {"message": "...", "retryable": true}} for a failure the tool reports itself.
 */
import { execa } from 'execa';
import { ToolError } from '../shared/errors.js';
import { isPlainObject, type JsonObject } from '../shared/json.js';
import type { ToolContext, ToolHandler } from './types.js';

export type Executor = (params: JsonObject, ctx: ToolContext) => Promise<unknown>;

/** Exit code a subprocess tool uses to say "temporary failure, retry me" (sysexits EX_TEMPFAIL). */
export const EXIT_RETRYABLE = 75;

/**
 * Runs a handler in this thread. The synchronous part of the call is timed: it is exactly the
 * time this tool held the event loop, so a blocking tool is named without guesswork.
 */
export function inProcessExecutor(handler: ToolHandler, onSyncTime: (ms: number, ctx: ToolContext) => void): Executor {
  return (params, ctx) => {
    const t0 = performance.now();
    let pending: unknown;
    try {
      pending = handler(params, ctx);
    } catch (err) {
      onSyncTime(performance.now() - t0, ctx);
      return Promise.reject(err);
    }
    onSyncTime(performance.now() - t0, ctx);
    return Promise.resolve(pending);
  };
}

export function requestBody(tool: string, params: JsonObject, ctx: ToolContext): string {
  return JSON.stringify({ tool, params, state: ctx.state, trace_id: ctx.traceId, instance_id: ctx.instanceId, attempt: ctx.attempt });
}

/** Interpret a JSON reply; `{"error": ...}` becomes a ToolError with the tool's own retryability. */
export function parseReply(text: string, tool: string, where: string): unknown {
  let reply: unknown;
  try {
    reply = JSON.parse(text);
  } catch (err) {
    const preview = text.length > 120 ? `${text.slice(0, 120)}…` : text;
    throw new ToolError('TOOL_MALFORMED_OUTPUT', tool, `${where} is not JSON (${(err as Error).message}): ${JSON.stringify(preview)}`, {
      cause: err,
      hint: 'A tool must write exactly one JSON object; send logs to stderr.',
    });
  }
  if (isPlainObject(reply) && 'error' in reply) {
    const e = reply['error'];
    const message = isPlainObject(e) ? String(e['message'] ?? 'failed') : String(e);
    const retryable = isPlainObject(e) && e['retryable'] === true;
    throw new ToolError('TOOL_FAILED', tool, message, { retryable });
  }
  return reply;
}

export function subprocessExecutor(tool: string, command: readonly string[], cwd: string, env: Readonly<Record<string, string>> | undefined): Executor {
  const [file, ...args] = command as [string, ...string[]];
  return async (params, ctx) => {
    const result = await execa(file, args, {
      input: requestBody(tool, params, ctx),
      cwd,
      ...(env ? { env } : {}),
      cancelSignal: ctx.signal,
      reject: false,
      stripFinalNewline: true,
      maxBuffer: 64 * 1024 * 1024,
      forceKillAfterDelay: 2_000,
    });
    if (ctx.signal.aborted) throw ctx.signal.reason;
    if (result.exitCode === undefined) {
      const code = (result.cause as NodeJS.ErrnoException | undefined)?.code;
      throw new ToolError('TOOL_FAILED', tool, `cannot start '${command.join(' ')}'${code ? ` (${code})` : ''}`, {
        cause: result.cause,
        hint: 'Check the "command" of this tool in env.json and that the program is installed.',
      });
    }
    if (result.exitCode !== 0) {
      const tail = String(result.stderr).split('\n').slice(-5).join('\n');
      // EX_TEMPFAIL is the tool saying "try again"; any other exit is a crash (a traceback, an uncaught exception).
      const retryable = result.exitCode === EXIT_RETRYABLE;
      throw new ToolError(retryable ? 'TOOL_FAILED' : 'TOOL_CRASHED', tool, `'${command.join(' ')}' exited with code ${result.exitCode}${tail ? `: ${tail}` : ''}`, { retryable });
    }
    return parseReply(String(result.stdout), tool, 'stdout');
  };
}

export function httpExecutor(tool: string, url: string, headers: Readonly<Record<string, string>> | undefined): Executor {
  return async (params, ctx) => {
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-trace-id': ctx.traceId, ...headers },
        body: requestBody(tool, params, ctx),
        signal: ctx.signal,
      });
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      throw new ToolError('TOOL_FAILED', tool, `POST ${url} failed: ${(err as Error).message}`, { cause: err, retryable: true });
    }
    const text = await response.text();
    if (!response.ok) {
      // 5xx and 429 are the service's trouble and may pass; other 4xx are the request's and will not.
      const retryable = response.status >= 500 || response.status === 429;
      throw new ToolError('TOOL_FAILED', tool, `POST ${url} answered ${response.status} ${response.statusText}${text ? `: ${text.slice(0, 200)}` : ''}`, { retryable });
    }
    return parseReply(text, tool, `the response of ${url}`);
  };
}

/**
 * Executors run one attempt of a tool call and return its raw result. The router wraps them
 * in the resilience policies and checks the result against the handler contract.
 *
 * Subprocess and HTTP tools speak the same JSON both ways. Request:
 *   {"tool": "...", "params": {...}, "state": {...}, "trace_id": "...", "instance_id": "...", "attempt": 1}
 * Response: {"observation": ..., "patch": [...], "rewards": {...}, "done": false}
 *   or {"error": {"message": "...", "retryable": true}} for a failure the tool reports itself.
 */
import { ToolError, describeError } from '../shared/errors.js';
import { isPlainObject, type JsonObject } from '../shared/json.js';
import type { ToolContext, ToolHandler } from './types.js';

export type Executor = (params: JsonObject, ctx: ToolContext) => Promise<unknown>;

/** Exit code a subprocess tool uses to say "temporary failure, retry me" (sysexits EX_TEMPFAIL). */
export const EXIT_RETRYABLE = 75;

/**
 * Runs a handler in this thread. The synchronous part of the call is timed: it is exactly the
 * time this tool held the event loop, so a blocking tool is named without guesswork.
 */
export function inProcessExecutor(handler: ToolHandler, onSyncTime: (ms: number, ctx: ToolContext) => void): (params: JsonObject, ctx: ToolContext) => unknown {
  // The handler's own value (a result or its promise) goes back as it is: wrapping it in one more
  // promise per call is measurable at thousands of calls in flight (bench/cold-start.bench.ts).
  return (params, ctx) => {
    const t0 = performance.now();
    try {
      return handler(params, ctx);
    } finally {
      onSyncTime(performance.now() - t0, ctx);
    }
  };
}

export function requestBody(tool: string, params: JsonObject, ctx: ToolContext): string {
  const traceparent = ctx.traceparent;
  return JSON.stringify({ tool, params, state: ctx.state, trace_id: ctx.traceId, instance_id: ctx.instanceId, attempt: ctx.attempt, ...(traceparent !== undefined ? { traceparent } : {}) });
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

export function httpExecutor(tool: string, url: string, headers: Readonly<Record<string, string>> | undefined, maxOutputBytes: number): Executor {
  return async (params, ctx) => {
    let response: Response;
    const traceparent = ctx.traceparent;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-trace-id': ctx.traceId, ...(traceparent !== undefined ? { traceparent } : {}), ...headers },
        body: requestBody(tool, params, ctx),
        signal: ctx.signal,
      });
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      throw new ToolError('TOOL_FAILED', tool, `POST ${url} failed: ${describeError(err)}`, { cause: err, retryable: true });
    }
    const text = await readCapped(response, maxOutputBytes, tool, url);
    if (!response.ok) {
      // 5xx and 429 are the service's trouble and may pass; other 4xx are the request's and will not.
      const retryable = response.status >= 500 || response.status === 429;
      throw new ToolError('TOOL_FAILED', tool, `POST ${url} answered ${response.status} ${response.statusText}${text ? `: ${text.slice(0, 200)}` : ''}`, { retryable });
    }
    return parseReply(text, tool, `the response of ${url}`);
  };
}

/** The response body as text, refused past `max` bytes without buffering the rest. */
async function readCapped(response: Response, max: number, tool: string, url: string): Promise<string> {
  const tooLarge = (): ToolError =>
    new ToolError('TOOL_OUTPUT_TOO_LARGE', tool, `the response of ${url} is larger than ${max} bytes`, {
      hint: 'Return less (a summary, an id to fetch the rest), or raise "max_output_bytes" for this tool in env.json.',
    });
  if (Number(response.headers.get('content-length') ?? 0) > max) {
    await response.body?.cancel();
    throw tooLarge();
  }
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.length;
    // Throwing out of the loop cancels the stream: the rest is never read.
    if (size > max) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString('utf8');
}

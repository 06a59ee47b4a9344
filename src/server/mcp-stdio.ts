/**
 * The MCP stdio transport `agent mcp-serve` speaks: newline-delimited JSON-RPC on stdin/stdout,
 * like the SDK's own, but a bad message is answered and the server keeps serving. The SDK's
 * transport closes the whole session on a line over its buffer cap (the server exited 0 with no
 * reply) and drops a request whose `params` is not an object without answering (the client
 * waits forever). Here:
 * - a line over `maxMessageBytes` is skipped as it streams in (never buffered whole) and answered
 *   `-32600` with the request's id when its head names one;
 * - a line that is not JSON is answered `-32700` (id null);
 * - a line that nests deeper than {@link MAX_JSON_DEPTH} levels is answered `-32600` with its id,
 *   before it is parsed: walking it (the SDK's schema, our validator) would overflow the stack far
 *   from the request, leaving it unanswered and the episode ended;
 * - a request that is JSON but not a valid JSON-RPC message is answered `-32602` when its params
 *   are the problem, `-32600` otherwise; an invalid notification is reported to `onerror`;
 * - while the client does not read what we write (stdout over its high-water mark), its requests
 *   are not read either: what it sends waits in the pipe, not in our memory.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../shared/json.js';

/** What one message may weigh: a call's params are small JSON (a 10 MiB state goes the other way, as a result). */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** How much of an oversized line is kept to find its id. */
const HEAD_BYTES = 4_096;

type Id = string | number | null;

function errorReply(id: Id, code: number, message: string): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code, message } } as unknown as JSONRPCMessage;
}

/** The id an oversized request names near its start (`"id": 7` or `"id": "a"`), if any. */
function idInHead(head: string): Id {
  const m = /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/.exec(head);
  if (!m) return null;
  const raw = m[1] as string;
  return raw.startsWith('"') ? (JSON.parse(raw) as string) : Number(raw);
}

export class LineTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #input: NodeJS.ReadableStream;
  readonly #output: NodeJS.WritableStream;
  readonly #max: number;
  readonly #check: (value: unknown) => { success: boolean };
  /** Pieces of the line being read. */
  #pieces: Buffer[] = [];
  #size = 0;
  /** Set while skipping an oversized line: its head, for the id. */
  #skipping: string | undefined;
  /** Set while the output is over its high-water mark: resolves at its next 'drain'. */
  #drained: Promise<void> | undefined;
  #closed = false;

  /** `check`: the SDK's JSON-RPC message schema's `safeParse` (passed in so that this module loads no SDK code). */
  constructor(check: (value: unknown) => { success: boolean }, options: { readonly input?: NodeJS.ReadableStream; readonly output?: NodeJS.WritableStream; readonly maxMessageBytes?: number } = {}) {
    this.#check = check;
    this.#input = options.input ?? process.stdin;
    this.#output = options.output ?? process.stdout;
    this.#max = options.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  }

  readonly #onData = (chunk: Buffer | string): void => {
    let data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    for (let nl = data.indexOf(0x0a); ; nl = data.indexOf(0x0a)) {
      const piece = nl === -1 ? data : data.subarray(0, nl);
      this.#take(piece);
      if (nl === -1) return;
      this.#endLine();
      data = data.subarray(nl + 1);
    }
  };

  #take(piece: Buffer): void {
    if (this.#skipping !== undefined) return;
    if (this.#size + piece.length > this.#max) {
      this.#skipping = Buffer.concat([...this.#pieces, piece]).subarray(0, HEAD_BYTES).toString('utf8');
      this.#pieces = [];
      this.#size = 0;
      return;
    }
    if (piece.length > 0) this.#pieces.push(piece);
    this.#size += piece.length;
  }

  #endLine(): void {
    if (this.#skipping !== undefined) {
      const id = idInHead(this.#skipping);
      this.#skipping = undefined;
      void this.send(errorReply(id, -32600, `message over ${this.#max} bytes: send smaller params (the message was dropped; the server goes on)`));
      return;
    }
    const line = Buffer.concat(this.#pieces).toString('utf8').replace(/\r$/, '');
    this.#pieces = [];
    this.#size = 0;
    if (line.trim() === '') return;
    if (nestsDeeperThan(line)) {
      void this.send(errorReply(idInHead(line.slice(0, HEAD_BYTES)), -32600, `message nests deeper than ${MAX_JSON_DEPTH} levels: send flatter params (the message was dropped; the server goes on)`));
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      void this.send(errorReply(null, -32700, `parse error: ${(err as Error).message}`));
      return;
    }
    if (this.#check(value).success) {
      this.onmessage?.(value as JSONRPCMessage);
      return;
    }
    const msg = (typeof value === 'object' && value !== null ? value : {}) as { id?: unknown; method?: unknown; params?: unknown };
    const id = typeof msg.id === 'string' || typeof msg.id === 'number' ? msg.id : null;
    if (typeof msg.method === 'string' && id !== null) {
      const badParams = msg.params !== undefined && (typeof msg.params !== 'object' || msg.params === null);
      void this.send(errorReply(id, badParams ? -32602 : -32600, badParams ? `invalid params: ${msg.method} takes an object` : 'invalid request: not a JSON-RPC 2.0 message'));
      return;
    }
    this.onerror?.(new Error(`dropped a message that is not JSON-RPC 2.0: ${line.slice(0, 200)}`));
  }

  readonly #onError = (err: Error): void => this.onerror?.(err);

  start(): Promise<void> {
    this.#input.on('data', this.#onData);
    this.#input.on('error', this.#onError);
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.#output.write(`${JSON.stringify(message)}\n`)) return this.#drained ?? Promise.resolve();
    this.#drained ??= new Promise<void>((resolve) => {
      this.#input.pause();
      this.#output.once('drain', () => {
        this.#drained = undefined;
        if (!this.#closed) this.#input.resume();
        resolve();
      });
    });
    return this.#drained;
  }

  close(): Promise<void> {
    this.#closed = true;
    this.#input.off('data', this.#onData);
    this.#input.off('error', this.#onError);
    if (this.#input.listenerCount('data') === 0) this.#input.pause();
    this.#pieces = [];
    this.onclose?.();
    return Promise.resolve();
  }
}

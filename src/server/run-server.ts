/**
 * The run's local HTTP server (`agent run … --port <port>`), on 127.0.0.1 only:
 * - `POST /rewards`: one delivery, an array of them, or JSON lines ({trace_id | episode+step |
 *   episode+time, source, value, key?}); answers 200 with each one's outcome when all landed,
 *   400 with each bad one's pointer and reason otherwise (the good ones land either way; a bad one
 *   changes nothing);
 * - `GET /health`: the run id and how many rewards are pending;
 * - `GET /events`: the run's events as server-sent events (`id` = order, `event` = type, `data` =
 *   the event as JSON), the last 10,000 replayed first; `Last-Event-ID` (or `?since=`) resumes after
 *   a disconnect; a client that stops reading is cut off (it reconnects and resumes);
 * - `GET /progress`: the live statistics as JSON;
 * - `GET /states/<id>`: an initial state by the id `episode_started` names (with the commits in
 *   the stream, enough to rebuild any episode's state).
 * What a debug console or a web view attaches to.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EnvRewards } from '../reward/env-rewards.js';
import type { DeliveryResult } from '../reward/ledger.js';
import { AgentError, isAgentError, ValidationError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';

/** A body larger than this is refused (413): rewards are small, and a runaway client must not eat the run's memory. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

export interface RunServerOptions {
  readonly port: number;
  readonly runId: string;
  readonly rewards: EnvRewards;
  /** A durable run: resolves once what landed is in Redis, so a 200 means it survives a crash. */
  readonly durable?: () => Promise<void>;
  /** The run's events, streamed on GET /events. */
  readonly events?: { onAny(listener: (event: { readonly type: string }) => void): () => void };
  /** The run's live statistics, on GET /progress. */
  readonly progress?: () => unknown;
  /** An initial state by its id (`initial-<n>`), on GET /states/<id>. */
  readonly initialState?: (id: string) => JsonValue | undefined;
  /** How many recent events a client that connects late is sent first (default 10,000). */
  readonly replay?: number;
  readonly signal?: AbortSignal;
}

/** Events kept for clients that connect late or reconnect, by default. */
const REPLAY = 10_000;
/** A client this far behind is cut off (it reconnects with Last-Event-ID). */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
const HEARTBEAT_MS = 15_000;

/** The run's events as server-sent events: numbered, buffered for late joiners, fanned out to clients. */
class EventStream implements Disposable {
  /** A ring of the last `replay` frames: frame n sits at (n - 1) % replay (shift() per event would be O(n)). */
  readonly #recent: string[] = [];
  readonly #replay: number;
  #next = 1;
  readonly #clients = new Set<ServerResponse>();
  readonly #off: () => void;
  readonly #heartbeat: NodeJS.Timeout;

  constructor(events: NonNullable<RunServerOptions['events']>, replay: number) {
    this.#replay = Math.max(1, replay);
    this.#off = events.onAny((e) => {
      const id = this.#next++;
      const frame = `id: ${id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
      this.#recent[(id - 1) % this.#replay] = frame;
      for (const res of this.#clients) this.#send(res, frame);
    });
    this.#heartbeat = setInterval(() => {
      for (const res of this.#clients) this.#send(res, ': ping\n\n');
    }, HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  #send(res: ServerResponse, frame: string): void {
    if (res.writableLength > MAX_BUFFERED_BYTES) {
      this.#clients.delete(res);
      res.end();
      return;
    }
    res.write(frame);
  }

  attach(req: IncomingMessage, res: ServerResponse, since: number): void {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write('retry: 1000\n\n');
    const first = Math.max(1, this.#next - this.#replay, since + 1);
    for (let id = first; id < this.#next; id++) res.write(this.#recent[(id - 1) % this.#replay] as string);
    this.#clients.add(res);
    req.on('close', () => this.#clients.delete(res));
  }

  [Symbol.dispose](): void {
    this.#off();
    clearInterval(this.#heartbeat);
    for (const res of this.#clients) res.end();
    this.#clients.clear();
  }
}

type ItemResult = { readonly index: number } & ({ readonly ok: true; readonly result: DeliveryResult } | { readonly ok: false; readonly pointer: string; readonly error: string });

export class RunServer implements AsyncDisposable {
  readonly #server: Server;
  readonly #stream: EventStream | undefined;
  readonly port: number;

  private constructor(server: Server, port: number, stream: EventStream | undefined) {
    this.#server = server;
    this.port = port;
    this.#stream = stream;
  }

  static async start(options: RunServerOptions): Promise<RunServer> {
    const stream = options.events ? new EventStream(options.events, options.replay ?? REPLAY) : undefined;
    const server = createServer((req, res) => void handle(req, res, options, stream).catch((err: unknown) => send(res, 500, { error: String(err) })));
    server.keepAliveTimeout = 1_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) =>
        reject(
          new AgentError('BAD_USAGE', `cannot listen on 127.0.0.1:${options.port}: ${err.code ?? err.message}`, {
            hint: err.code === 'EADDRINUSE' ? 'Another process uses that port: pick another, or 0 for any free one.' : 'Pick a port between 1024 and 65535, or 0 for any free one.',
          }),
        ),
      );
      server.listen(options.port, '127.0.0.1', () => resolve());
    });
    return new RunServer(server, (server.address() as AddressInfo).port, stream);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#stream?.[Symbol.dispose]();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

async function handle(req: IncomingMessage, res: ServerResponse, options: RunServerOptions, stream: EventStream | undefined): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  if (req.method === 'GET' && url.pathname === '/health') {
    const size = options.rewards.ledger.size;
    return send(res, 200, { run_id: options.runId, steps: size.steps, pending_rewards: size.pending });
  }
  if (req.method === 'GET' && url.pathname === '/events' && stream) {
    const since = Number(req.headers['last-event-id'] ?? url.searchParams.get('since') ?? 0);
    return stream.attach(req, res, Number.isInteger(since) && since > 0 ? since : 0);
  }
  if (req.method === 'GET' && url.pathname === '/progress' && options.progress) return send(res, 200, options.progress() as object);
  if (req.method === 'GET' && url.pathname.startsWith('/states/') && options.initialState) {
    const id = decodeURIComponent(url.pathname.slice('/states/'.length));
    const state = options.initialState(id);
    return state === undefined ? send(res, 404, { error: `no initial state '${id}'` }) : send(res, 200, state);
  }
  if (url.pathname !== '/rewards') return send(res, 404, { error: `no route ${url.pathname}: POST /rewards, GET /events, GET /progress, GET /states/<id> or GET /health` });
  if (req.method !== 'POST') return send(res, 405, { error: 'POST a delivery (or an array, or JSON lines) to /rewards' });
  const body = await readBody(req);
  if (body === undefined) return send(res, 413, { error: `body over ${MAX_BODY_BYTES} bytes: send fewer rewards per request` });
  let items: unknown[];
  try {
    const trimmed = body.trim();
    items = trimmed.startsWith('[') ? (JSON.parse(trimmed) as unknown[]) : trimmed.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as unknown);
  } catch (err) {
    return send(res, 400, { error: `body is not JSON: ${(err as Error).message}` });
  }
  const results: ItemResult[] = items.map((item, index) => {
    try {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new ValidationError('REWARD_INVALID', 'reward not delivered', [{ pointer: '', message: 'must be an object' }], 'Send {trace_id, source, value}.');
      return { index, ok: true, result: options.rewards.submit(item as never) };
    } catch (err) {
      if (!isAgentError(err)) throw err;
      const issue = err instanceof ValidationError ? err.issues[0] : undefined;
      return { index, ok: false, pointer: issue?.pointer ?? '', error: issue?.message ?? err.message };
    }
  });
  if (options.durable && results.some((r) => r.ok)) {
    try {
      await options.durable();
    } catch (err) {
      return send(res, 503, { error: `the rewards landed but could not be journaled: ${isAgentError(err) ? err.message : String(err)}`, results });
    }
  }
  send(res, results.every((r) => r.ok) ? 200 : 400, { results });
}

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: JsonValue | object): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
}

/**
 * The run's local HTTP server (`agent run … --port <port>`), on 127.0.0.1 unless told otherwise
 * (with a token). Only its owner gets in: every route but /health needs the run's bearer token,
 * and Host, Origin and content-type are checked (see `http-guard.ts`) so that no web page the user
 * has open can post rewards or read the run.
 * - `POST /rewards`: one delivery, an array of them, or JSON lines ({trace_id | episode+step |
 *   episode+time, source, value, key?}); answers 200 with each one's outcome when all landed,
 *   400 with each bad one's pointer and reason otherwise (the good ones land either way; a bad one
 *   changes nothing);
 * - `GET /health`: the run id and how many rewards are pending;
 * - `GET /events`: the run's events as server-sent events (`id` = order, `event` = type, `data` =
 *   the event as JSON), the last 10,000 replayed first; `Last-Event-ID` (or `?since=`) resumes after
 *   a disconnect; each client is written as fast as it reads (what it has not read stays in the
 *   shared ring), and one that falls out of the ring is cut off (it reconnects and resumes);
 * - `GET /progress`: the live statistics as JSON;
 * - `GET /metrics`: Prometheus metrics (counts and names, no state or params: open like /health,
 *   so a scraper needs no token; still behind the Host and Origin checks);
 * - `GET /states/<id>`: an initial state by the id `episode_started` names (with the commits in
 *   the stream, enough to rebuild any episode's state).
 * - `GET /` (with `mount`): the web console (src/console), its page open, its `/api/` behind the token.
 * What a debug console or a web view attaches to.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { EnvRewards } from '../reward/env-rewards.js';
import type { DeliveryResult } from '../reward/ledger.js';
import { AgentError, describeError, isAgentError, ValidationError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { guardRequest, isLoopback, newToken, type GuardOptions } from './http-guard.js';
import { baseUrl, listen } from './listen.js';

/** A body larger than this is refused (413): rewards are small, and a runaway client must not eat the run's memory. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

export interface RunServerOptions {
  readonly port: number;
  /** The address to listen on: loopback (`127.0.0.1`, the default) or, with a token, any other (`0.0.0.0` for a cluster). */
  readonly host?: string;
  /**
   * Every route but GET /health needs `Authorization: Bearer <token>`. A loopback server without
   * one generates one; a server on any other address must be given one.
   */
  readonly token?: string;
  readonly runId: string;
  readonly rewards: EnvRewards;
  /** A durable run: resolves once what landed is in Redis, so a 200 means it survives a crash. */
  readonly durable?: () => Promise<void>;
  /** The run's events, streamed on GET /events. */
  readonly events?: { onAny(listener: (event: { readonly type: string }) => void): () => void };
  /** The run's live statistics, on GET /progress. */
  readonly progress?: () => unknown;
  /** Prometheus metrics, on GET /metrics (src/observe/prometheus.ts). */
  readonly metrics?: () => Promise<{ readonly contentType: string; readonly body: string }>;
  /** An initial state by its id (`initial-<n>`), on GET /states/<id>. */
  readonly initialState?: (id: string) => JsonValue | undefined;
  /** How many recent events a client that connects late is sent first (default 10,000). */
  readonly replay?: number;
  /** How many /events clients at once (default 64): one more is refused with 503. */
  readonly maxSubscribers?: number;
  /** Told why a client of /events was cut off (it may reconnect with Last-Event-ID). */
  readonly onClientDropped?: (reason: string) => void;
  /** Routes served beside the run's own, tried first (the web console): its `open` pathnames need no token. */
  readonly mount?: MountedRoutes;
  readonly signal?: AbortSignal;
}

export interface MountedRoutes {
  readonly open: ReadonlySet<string>;
  /** Answers the request and resolves true, or resolves false when the route is not its own. */
  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean>;
}

/** Events kept for clients that connect late or reconnect, by default. */
const REPLAY = 10_000;
const MAX_SUBSCRIBERS = 64;
/**
 * What one client may have waiting in its socket: past this, frames stay in the shared ring and
 * are written at a later flush, so a client that never reads holds ~64 KiB, not the stream.
 */
const CLIENT_HIGH_WATER = 64 * 1024;
const HEARTBEAT_MS = 15_000;
/** How often the clients of /events are written, and how much at most each time (all clients together). */
const FLUSH_MS = 10;
const FLUSH_BYTES = 1024 * 1024;

interface Subscriber {
  readonly res: ServerResponse;
  readonly address: string;
  /** The id of the next frame to write to it. */
  next: number;
}

/**
 * The run's events as server-sent events: numbered, kept in a ring for late joiners, written to
 * each client as fast as it reads. An event only goes into the ring; every {@link FLUSH_MS} the
 * clients are written, each with one write of the frames it lacks (up to its high-water mark),
 * round-robin within {@link FLUSH_BYTES} per flush. Writing each event to each client as it came
 * cost a run at 10k steps/s a syscall per event per client, and slowed its event loop to ~30
 * turns a second with 300 clients that never read: Node accepts one connection per turn, so
 * /health waited seconds behind the clients' reconnections.
 */
class EventStream implements Disposable {
  /** A ring of the last `replay` frames: frame n sits at (n - 1) % replay (shift() per event would be O(n)). */
  readonly #recent: string[] = [];
  readonly #replay: number;
  readonly #max: number;
  readonly #onDrop: (reason: string) => void;
  #next = 1;
  readonly #clients = new Set<Subscriber>();
  readonly #off: () => void;
  readonly #heartbeat: NodeJS.Timeout;
  #flush: NodeJS.Timeout | undefined;

  constructor(events: NonNullable<RunServerOptions['events']>, replay: number, max: number, onDrop: (reason: string) => void) {
    this.#replay = Math.max(1, replay);
    this.#max = max;
    this.#onDrop = onDrop;
    this.#off = events.onAny((e) => {
      const id = this.#next++;
      this.#recent[(id - 1) % this.#replay] = `id: ${id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
      if (this.#clients.size > 0) this.#schedule();
    });
    this.#heartbeat = setInterval(() => {
      for (const c of this.#clients) if (c.next === this.#next && c.res.writableLength < CLIENT_HIGH_WATER) c.res.write(': ping\n\n');
    }, HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  get full(): boolean {
    return this.#clients.size >= this.#max;
  }

  readonly #flushAll = (): void => {
    this.#flush = undefined;
    let budget = FLUSH_BYTES;
    for (const c of [...this.#clients]) {
      if (budget <= 0) break;
      const written = this.#pump(c, budget);
      if (written === 0) continue;
      budget -= written;
      // Served: to the back of the line, so that the next flush starts with those this one did not reach.
      this.#clients.delete(c);
      this.#clients.add(c);
    }
    if (budget <= 0) this.#schedule();
  };

  #schedule(): void {
    if (this.#flush) return;
    this.#flush = setTimeout(this.#flushAll, FLUSH_MS);
    this.#flush.unref();
  }

  /** Writes what the client has not had yet, in one write, within its high-water mark and `budget` bytes (all of it when `last`); returns the bytes written. */
  #pump(c: Subscriber, budget = CLIENT_HIGH_WATER, last = false): number {
    const oldest = Math.max(1, this.#next - this.#replay);
    if (c.next < oldest) {
      this.#drop(c, `client ${c.address} fell more than ${this.#replay} events behind on /events: cut off (it may reconnect with Last-Event-ID)`);
      return 0;
    }
    let room = last ? Number.POSITIVE_INFINITY : Math.min(budget, CLIENT_HIGH_WATER - c.res.writableLength);
    if (room <= 0 || c.next >= this.#next) return 0;
    let batch = '';
    while (c.next < this.#next && room > 0) {
      const frame = this.#recent[(c.next - 1) % this.#replay] as string;
      batch += frame;
      room -= frame.length;
      c.next++;
    }
    c.res.write(batch);
    return batch.length;
  }

  #drop(c: Subscriber, reason: string): void {
    this.#clients.delete(c);
    c.res.destroy();
    this.#onDrop(reason);
  }

  attach(req: IncomingMessage, res: ServerResponse, since: number): void {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write('retry: 1000\n\n');
    const c: Subscriber = { res, address: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`, next: Math.max(1, this.#next - this.#replay, since + 1) };
    this.#clients.add(c);
    // A drained client waits for the next flush: pumping it from 'drain' fed a socket whose kernel buffer
    // still had room from process.nextTick, write after write, without ever yielding to I/O.
    res.on('drain', () => this.#schedule());
    req.on('close', () => this.#clients.delete(c));
    this.#pump(c);
  }

  [Symbol.dispose](): void {
    this.#off();
    clearInterval(this.#heartbeat);
    clearTimeout(this.#flush);
    // The events not flushed yet (the run's last ones, run_finished among them) go out before the stream ends.
    for (const c of this.#clients) {
      this.#pump(c, CLIENT_HIGH_WATER, true);
      c.res.end();
    }
    this.#clients.clear();
  }
}

type ItemResult = { readonly index: number } & ({ readonly ok: true; readonly result: DeliveryResult } | { readonly ok: false; readonly pointer: string; readonly error: string });

const OPEN_ROUTES = new Set(['/health', '/metrics']);

export class RunServer implements AsyncDisposable {
  readonly #server: Server;
  readonly #stream: EventStream | undefined;
  readonly port: number;
  readonly host: string;
  /** The bearer token every route but /health needs. */
  readonly token: string;

  private constructor(server: Server, host: string, port: number, token: string, stream: EventStream | undefined) {
    this.#server = server;
    this.host = host;
    this.port = port;
    this.token = token;
    this.#stream = stream;
  }

  /** The base URL clients use (`http://127.0.0.1:<port>`; a wildcard bind is reached on loopback from here). */
  get url(): string {
    return baseUrl(this.host, this.port);
  }

  static async start(options: RunServerOptions): Promise<RunServer> {
    const host = options.host ?? '127.0.0.1';
    if (!isLoopback(host) && (options.token === undefined || options.token === '')) {
      throw new AgentError('BAD_USAGE', `serving on ${host} needs a token: the server would answer anyone who can reach this machine`, { hint: 'Pass --token <secret> (or set AGENT_TOKEN), and give it to the clients that post rewards; or keep the default host 127.0.0.1.' });
    }
    const token = options.token ?? newToken();
    const stream = options.events ? new EventStream(options.events, options.replay ?? REPLAY, options.maxSubscribers ?? MAX_SUBSCRIBERS, options.onClientDropped ?? (() => undefined)) : undefined;
    const guard = { host, token, open: options.mount ? new Set([...OPEN_ROUTES, ...options.mount.open]) : OPEN_ROUTES, tokenHint: 'the token agent run printed, also in <run>/server.json' };
    const server = createServer((req, res) =>
      void handle(req, res, options, stream, guard).catch((err: unknown) => send(res, 500, { error: describeError(err) })),
    );
    server.keepAliveTimeout = 1_000;
    return new RunServer(server, host, await listen(server, host, options.port), token, stream);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#stream?.[Symbol.dispose]();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

async function handle(req: IncomingMessage, res: ServerResponse, options: RunServerOptions, stream: EventStream | undefined, guard: GuardOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const refused = guardRequest(req, url.pathname, guard);
  if (refused) return send(res, refused.status, { error: refused.error });
  if (options.mount && (await options.mount.handle(req, res, url))) return;
  if (req.method === 'GET' && url.pathname === '/health') {
    const size = options.rewards.ledger.size;
    return send(res, 200, { run_id: options.runId, steps: size.steps, pending_rewards: size.pending });
  }
  if (req.method === 'GET' && url.pathname === '/events' && stream) {
    if (stream.full) return send(res, 503, { error: 'too many clients on /events: close one, or try again later' });
    const since = Number(req.headers['last-event-id'] ?? url.searchParams.get('since') ?? 0);
    return stream.attach(req, res, Number.isInteger(since) && since > 0 ? since : 0);
  }
  if (req.method === 'GET' && url.pathname === '/progress' && options.progress) return send(res, 200, options.progress() as object);
  if (req.method === 'GET' && url.pathname === '/metrics' && options.metrics) {
    const page = await options.metrics();
    res.writeHead(200, { 'content-type': page.contentType }).end(page.body);
    return;
  }
  if (req.method === 'GET' && url.pathname.startsWith('/states/') && options.initialState) {
    let id: string;
    try {
      id = decodeURIComponent(url.pathname.slice('/states/'.length));
    } catch {
      return send(res, 400, { error: `'${url.pathname}' has a malformed percent-escape: ask for /states/initial-<n>` });
    }
    const state = options.initialState(id);
    return state === undefined ? send(res, 404, { error: `no initial state '${id}'` }) : send(res, 200, state);
  }
  if (url.pathname !== '/rewards') return send(res, 404, { error: `no route ${url.pathname}: POST /rewards, GET /events,${options.mount ? ' GET / (the web console),' : ''} GET /progress, GET /metrics, GET /states/<id> or GET /health` });
  if (req.method !== 'POST') return send(res, 405, { error: 'POST a delivery (or an array, or JSON lines) to /rewards' });
  const body = await readBody(req);
  if (body === undefined) return send(res, 413, { error: `body over ${MAX_BODY_BYTES} bytes: send fewer rewards per request` });
  let items: unknown[];
  try {
    items = parseDeliveries(body);
  } catch (err) {
    return send(res, 400, { error: `body is not JSON or JSON lines: ${(err as Error).message}` });
  }
  const results: ItemResult[] = items.map((item, index) => {
    try {
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

/** A body is one JSON value (an object or an array of them, pretty-printed or not) or JSON lines. */
function parseDeliveries(body: string): unknown[] {
  const trimmed = body.trim();
  try {
    const whole = JSON.parse(trimmed) as unknown;
    return Array.isArray(whole) ? whole : [whole];
  } catch (err) {
    // Not one value: JSON lines, or the whole body's own syntax error when it is one line.
    if (!trimmed.includes('\n')) throw err;
  }
  return trimmed
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, i) => {
      try {
        return JSON.parse(l) as unknown;
      } catch (err) {
        throw new Error(`line ${i + 1}: ${(err as Error).message}`);
      }
    });
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

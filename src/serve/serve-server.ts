/**
 * `agent serve`'s network face: OpenEnv's protocol over a WebSocket (`/ws`, one session per
 * connection, many at once) and its HTTP routes, plus our async extension on the same socket.
 *
 * WebSocket messages (`{"type", "data"}`; a message with an `id` is answered with the same `id`
 * and may overlap others, one without is answered in order, as OpenEnv's client expects):
 * - `reset` {seed?, episode_id?, task_id?} → `observation` {observation, reward, done, …}
 * - `step` <action> → `observation`;  `state` → `state` {episode_id, step_count, state, seq}
 * - `dispatch` <action> → `dispatched` {trace_id}, at once
 * - `resolve` {trace_ids, timeout_ms?} → `resolved` {results: [envelope…]}
 * - `state_at` {seq} → `state`;  `rewards` → `rewards` {episode_id, rewards}
 * - `subscribe` → `subscribed`, then `reward` pushes for this socket's episodes (never unasked:
 *   OpenEnv's client reads the next message as the reply to its request)
 * - `close` ends the session. A socket that goes away ends its episode as truncated.
 * HTTP: `POST /reset`, `POST /step` {action, episode_id}, `GET /state?episode_id=`, `POST /close`,
 * `GET /schema`, `GET /health`, `GET /episodes/<id>/rewards`. An HTTP session is an episode kept by
 * its id, ended after `httpIdleMs` without a request.
 * Security as the run server's (http-guard.ts): Host and Origin always (the upgrade included), a
 * bearer token off loopback or when given.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { RunEvent } from '../events/run-events.js';
import type { MetricsPage } from '../observe/prometheus.js';
import { isLoggedReward, rewardRecord, type RewardLogRecord } from '../replay/reward-log.js';
import { guardRequest, type GuardOptions } from '../server/http-guard.js';
import { baseUrl, listen } from '../server/listen.js';
import { AgentError, describeError } from '../shared/errors.js';
import { isPlainObject } from '../shared/json.js';
import { errorData, parseAction } from './protocol.js';
import type { ServedEpisode, ServedTask } from './served-episode.js';

const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Finished episodes whose rewards stay readable at /episodes/<id>/rewards (delayed ones keep arriving). */
const KEPT_EPISODES = 10_000;

/** How a reset chooses the episode's start: the server's answer to {seed, task_id}. */
export interface EpisodeOpener {
  /** A new episode (not yet started) for these reset options; a typed error for a bad one. */
  open(options: { readonly seed?: number; readonly episodeId?: string; readonly taskId?: string }): ServedEpisode;
  /** Hands it to the run, which resets its instance. */
  start(episode: ServedEpisode): void;
}

export interface ServeServerOptions {
  readonly port: number;
  readonly host: string;
  readonly token: string | undefined;
  readonly maxSessions: number;
  readonly httpIdleMs: number;
  readonly runId: string;
  readonly opener: EpisodeOpener;
  /** The run's events: delayed rewards go to their episode's readers and subscribers. */
  readonly events: { onAny(listener: (e: RunEvent) => void): () => void };
  /** GET /schema: the action, observation and state schemas. */
  readonly schema: object;
  readonly tasks?: readonly ServedTask[];
  /** GET /metrics: Prometheus metrics (open like /health: counts and names only). */
  readonly metrics?: () => Promise<MetricsPage>;
}

/** What the server keeps of an episode for its reward readers and subscribers. */
interface EpisodeLog {
  readonly id: string;
  readonly rewards: RewardLogRecord[];
  subscriber: ((record: RewardLogRecord) => void) | undefined;
}

export class ServeServer implements AsyncDisposable {
  readonly #o: ServeServerOptions;
  readonly #http: Server;
  readonly #ws: WebSocketServer;
  readonly #guard: GuardOptions;
  /** Live episodes by id (the client's, or `ep-<n>`). */
  readonly #live = new Map<string, ServedEpisode>();
  /** Reward logs by the run's episode index, oldest first (a Map keeps insertion order). */
  readonly #logs = new Map<number, EpisodeLog>();
  readonly #byId = new Map<string, number>();
  readonly #httpSessions = new Map<string, { timer: NodeJS.Timeout; abort: AbortController }>();
  readonly #sockets = new Set<WebSocket>();
  readonly #unsubscribe: () => void;
  port = 0;

  private constructor(options: ServeServerOptions) {
    this.#o = options;
    this.#guard = { host: options.host, ...(options.token !== undefined ? { token: options.token } : {}), open: new Set(['/health', '/metrics']), tokenHint: 'the token agent serve was given (--token or AGENT_TOKEN)' };
    this.#ws = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY_BYTES });
    this.#http = createServer((req, res) => void this.#route(req, res).catch((err: unknown) => send(res, 500, { error: describeError(err) })));
    this.#http.keepAliveTimeout = 5_000;
    this.#http.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => this.#upgrade(req, socket, head));
    this.#unsubscribe = options.events.onAny((e) => this.#onRunEvent(e));
  }

  static async start(options: ServeServerOptions): Promise<ServeServer> {
    const server = new ServeServer(options);
    server.port = await listen(server.#http, options.host, options.port);
    return server;
  }

  get url(): string {
    return baseUrl(this.#o.host, this.port);
  }

  get sessions(): number {
    return this.#sockets.size + this.#httpSessions.size;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#unsubscribe();
    for (const s of this.#httpSessions.values()) {
      clearTimeout(s.timer);
      s.abort.abort();
    }
    this.#httpSessions.clear();
    for (const ws of this.#sockets) ws.terminate();
    this.#ws.close();
    this.#http.closeAllConnections();
    await new Promise<void>((resolve) => this.#http.close(() => resolve()));
  }

  #onRunEvent(e: RunEvent): void {
    if (!isLoggedReward(e)) return;
    const log = this.#logs.get(e.episode);
    if (!log) return;
    const record = rewardRecord(e);
    log.rewards.push(record);
    log.subscriber?.(record);
  }

  /** A reset: the new episode, once the run has reset its instance. */
  async #reset(data: unknown, current?: ServedEpisode): Promise<ServedEpisode> {
    const o = isPlainObject(data) ? data : {};
    const field = (name: string, ok: (v: unknown) => boolean, want: string): void => {
      if (o[name] !== undefined && o[name] !== null && !ok(o[name])) throw new AgentError('PARAMS_INVALID', `reset /${name} must be ${want}`, { hint: 'Reset takes {"seed"?: integer, "episode_id"?: string, "task_id"?: string}.' });
    };
    field('seed', Number.isInteger, 'an integer');
    field('episode_id', (v) => typeof v === 'string' && v !== '', 'a non-empty string');
    field('task_id', (v) => typeof v === 'string', 'a string (a task id of the served suite)');
    const episodeId = o['episode_id'] as string | undefined;
    if (episodeId !== undefined && this.#live.has(episodeId) && this.#live.get(episodeId) !== current) {
      throw new AgentError('BAD_USAGE', `episode '${episodeId}' is live in another session`, { hint: 'Give each episode its own id, or none (the server names it).' });
    }
    current?.end();
    const episode = this.#o.opener.open({ ...(typeof o['seed'] === 'number' ? { seed: o['seed'] } : {}), ...(episodeId !== undefined ? { episodeId } : {}), ...(typeof o['task_id'] === 'string' ? { taskId: o['task_id'] } : {}) });
    this.#o.opener.start(episode);
    const control = await episode.started;
    this.#live.set(episode.id, episode);
    this.#logs.set(control.episode, { id: episode.id, rewards: [], subscriber: undefined });
    this.#byId.set(episode.id, control.episode);
    this.#trimLogs();
    void episode.closed.then(() => {
      if (this.#live.get(episode.id) === episode) this.#live.delete(episode.id);
    });
    return episode;
  }

  #trimLogs(): void {
    for (const [index, log] of this.#logs) {
      if (this.#logs.size <= KEPT_EPISODES) break;
      if (this.#live.has(log.id)) continue;
      this.#logs.delete(index);
      if (this.#byId.get(log.id) === index) this.#byId.delete(log.id);
    }
  }

  #rewardsOf(id: string): { episode_id: string; episode: number; rewards: RewardLogRecord[] } {
    const index = this.#byId.get(id);
    const log = index === undefined ? undefined : this.#logs.get(index);
    if (index === undefined || !log) throw new AgentError('EPISODE_UNKNOWN', `no episode '${id}' on this server`, { hint: `The server keeps the rewards of its last ${KEPT_EPISODES} episodes; the run folder keeps all of them (rewards.jsonl).` });
    return { episode_id: id, episode: index, rewards: log.rewards };
  }

  // ── WebSocket ────────────────────────────────────────────────────────────────────────────

  #upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const refused = url.pathname !== '/ws' ? { status: 404, error: `no WebSocket at ${url.pathname}: connect to /ws` } : guardRequest(req, url.pathname, this.#guard);
    if (refused) {
      socket.end(`HTTP/1.1 ${refused.status} ${refused.status === 404 ? 'Not Found' : refused.status === 401 ? 'Unauthorized' : 'Forbidden'}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify({ error: refused.error })}\n`);
      return;
    }
    this.#ws.handleUpgrade(req, socket, head, (ws) => {
      if (this.sessions >= this.#o.maxSessions) {
        ws.send(JSON.stringify({ type: 'error', data: { ...errorData(new AgentError('CAPACITY_REACHED', `every session of this server is taken (${this.#o.maxSessions})`, { hint: 'Close a session, or start the server with a larger --max-sessions.' })), max_sessions: this.#o.maxSessions } }));
        ws.close(1013, 'capacity reached');
        return;
      }
      this.#connect(ws);
    });
  }

  #connect(ws: WebSocket): void {
    this.#sockets.add(ws);
    const abort = new AbortController();
    let episode: ServedEpisode | undefined;
    /** Rewards are pushed only once asked for: OpenEnv's client reads the next message as its reply. */
    let subscribed = false;
    let inOrder: Promise<void> = Promise.resolve();
    const reply = (message: object): void => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
    };
    const handle = async (message: Record<string, unknown>): Promise<object | undefined> => {
      const data = message['data'] ?? {};
      const args = isPlainObject(data) ? data : {};
      switch (message['type']) {
        case 'reset':
          episode = await this.#reset(data, episode);
          return { type: 'observation', data: episode.resetEnvelope() };
        case 'step':
          return { type: 'observation', data: await need(episode).step(parseAction(data, '/data'), abort.signal) };
        case 'dispatch':
          return { type: 'dispatched', data: { trace_id: need(episode).dispatch(parseAction(data, '/data')) } };
        case 'resolve': {
          const ids = args['trace_ids'] ?? message['trace_ids'];
          const timeout = args['timeout_ms'] ?? message['timeout_ms'];
          if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string')) throw new AgentError('PARAMS_INVALID', 'resolve /data/trace_ids must be an array of trace ids', { hint: 'Send {"type": "resolve", "data": {"trace_ids": ["ep-0:1", …], "timeout_ms"?: 1000}}.' });
          if (timeout !== undefined && !(typeof timeout === 'number' && timeout >= 0)) throw new AgentError('PARAMS_INVALID', 'resolve /data/timeout_ms must be a number ≥ 0');
          return { type: 'resolved', data: { results: await need(episode).resolve(ids as string[], { signal: abort.signal, ...(typeof timeout === 'number' ? { timeoutMs: timeout } : {}) }) } };
        }
        case 'state':
          return { type: 'state', data: need(episode).state() };
        case 'state_at': {
          const seq = args['seq'];
          if (!Number.isInteger(seq)) throw new AgentError('PARAMS_INVALID', 'state_at /data/seq must be an integer', { hint: 'Send {"type": "state_at", "data": {"seq": 3}}.' });
          return { type: 'state', data: await need(episode).stateAt(seq as number, abort.signal) };
        }
        case 'rewards':
          return { type: 'rewards', data: this.#rewardsOf(typeof args['episode_id'] === 'string' ? args['episode_id'] : need(episode).id) };
        case 'subscribe':
          subscribed = true;
          return { type: 'subscribed', data: {} };
        case 'close':
          ws.close(1000);
          return undefined;
        default:
          return { type: 'error', data: { message: `unknown message type '${String(message['type'])}'`, code: 'UNKNOWN_TYPE', hint: 'Send reset, step, state, dispatch, resolve, state_at, rewards, subscribe or close.' } };
      }
    };
    // Rewards of every episode this socket opened go to it once it subscribed.
    const attach = (e: ServedEpisode): void => {
      const index = e.index;
      const log = index === undefined ? undefined : this.#logs.get(index);
      if (log) log.subscriber = (record) => subscribed && reply({ type: 'reward', data: { ...record, episode_id: log.id } });
    };
    ws.on('message', (raw: RawData, isBinary: boolean) => {
      let message: unknown;
      try {
        message = JSON.parse(isBinary ? Buffer.from(raw as Buffer).toString('utf8') : String(raw));
      } catch (err) {
        return reply({ type: 'error', data: { message: `invalid JSON: ${(err as Error).message}`, code: 'INVALID_JSON' } });
      }
      if (!isPlainObject(message)) return reply({ type: 'error', data: { message: 'a message must be an object {"type", "data"}', code: 'VALIDATION_ERROR' } });
      const id = message['id'];
      const run = (): Promise<void> =>
        handle(message).then(
          (answer) => {
            if (message['type'] === 'reset' && episode) attach(episode);
            if (answer) reply(id === undefined ? answer : { ...answer, id });
          },
          (err: unknown) => reply({ type: 'error', data: errorData(err), ...(id === undefined ? {} : { id }) }),
        );
      if (id === undefined) inOrder = inOrder.then(run);
      else void run();
    });
    ws.on('close', () => {
      this.#sockets.delete(ws);
      abort.abort(new AgentError('INTERRUPTED', 'the client went away'));
      episode?.end();
    });
    ws.on('error', () => ws.terminate());
  }

  // ── HTTP ─────────────────────────────────────────────────────────────────────────────────

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const refused = guardRequest(req, url.pathname, this.#guard);
    if (refused) return send(res, refused.status, { error: refused.error });
    const path = url.pathname;
    try {
      if (req.method === 'GET' && path === '/health') return send(res, 200, { status: 'healthy', run_id: this.#o.runId, sessions: this.sessions, max_sessions: this.#o.maxSessions });
      if (req.method === 'GET' && path === '/schema') return send(res, 200, this.#o.schema);
      if (req.method === 'GET' && path === '/metrics' && this.#o.metrics) {
        const page = await this.#o.metrics();
        res.writeHead(200, { 'content-type': page.contentType }).end(page.body);
        return;
      }
      if (req.method === 'GET' && path === '/tasks') return send(res, 200, { tasks: (this.#o.tasks ?? []).map((t) => ({ id: t.id, instruction: t.instruction })) });
      if (req.method === 'GET' && path === '/state') return send(res, 200, this.#httpEpisode(url.searchParams.get('episode_id')).state());
      const rewards = /^\/episodes\/([^/]+)\/rewards$/.exec(path);
      if (req.method === 'GET' && rewards) return send(res, 200, this.#rewardsOf(decodeURIComponent(rewards[1] as string)));
      if (req.method !== 'POST' || !['/reset', '/step', '/close'].includes(path)) {
        return send(res, 404, { error: `no route ${req.method ?? ''} ${path}: POST /reset, POST /step, POST /close, GET /state, GET /schema, GET /health, GET /metrics, GET /tasks, GET /episodes/<id>/rewards, or a WebSocket at /ws` });
      }
      const body = await readJson(req);
      if (path === '/reset') {
        if (this.sessions >= this.#o.maxSessions) throw new AgentError('CAPACITY_REACHED', `every session of this server is taken (${this.#o.maxSessions})`, { hint: 'Close a session (POST /close), or start the server with a larger --max-sessions.' });
        const episode = await this.#reset(body);
        this.#keepHttp(episode);
        return send(res, 200, episode.resetEnvelope());
      }
      const o = isPlainObject(body) ? body : {};
      const episode = this.#httpEpisode(typeof o['episode_id'] === 'string' ? o['episode_id'] : null);
      if (path === '/close') {
        episode.end();
        return send(res, 200, { episode_id: episode.id, closed: true });
      }
      const session = this.#keepHttp(episode);
      const timeoutS = o['timeout_s'];
      const envelope = typeof timeoutS === 'number' && timeoutS >= 0 ? (await episode.resolve([episode.dispatch(parseAction(o['action'], '/action'))], { signal: session.abort.signal, timeoutMs: timeoutS * 1000 }))[0] : await episode.step(parseAction(o['action'], '/action'), session.abort.signal);
      return send(res, 200, envelope as object);
    } catch (err) {
      const data = errorData(err);
      return send(res, STATUS[data.code] ?? 400, { error: data.message, ...data });
    }
  }

  #httpEpisode(id: string | null): ServedEpisode {
    if (id === null) throw new AgentError('PARAMS_INVALID', 'episode_id is missing', { hint: 'Send the episode_id that POST /reset answered (in its observation), as ?episode_id= or in the body.' });
    const episode = this.#live.get(id);
    if (!episode || !this.#httpSessions.has(id)) throw new AgentError('EPISODE_UNKNOWN', `no live HTTP episode '${id}'`, { hint: 'POST /reset starts one; an HTTP episode ends when done, closed, or idle for the server\'s --http-idle.' });
    return episode;
  }

  /** An HTTP session lives while requests come: each one restarts its idle timer. */
  #keepHttp(episode: ServedEpisode): { timer: NodeJS.Timeout; abort: AbortController } {
    const existing = this.#httpSessions.get(episode.id);
    if (existing) {
      existing.timer.refresh();
      return existing;
    }
    const session = { timer: setTimeout(() => episode.end(), this.#o.httpIdleMs), abort: new AbortController() };
    session.timer.unref();
    this.#httpSessions.set(episode.id, session);
    void episode.closed.then(() => {
      clearTimeout(session.timer);
      session.abort.abort(new AgentError('INTERRUPTED', 'the episode ended'));
      if (this.#httpSessions.get(episode.id) === session) this.#httpSessions.delete(episode.id);
    });
    return session;
  }
}

const STATUS: Readonly<Record<string, number>> = { EPISODE_UNKNOWN: 404, CAPACITY_REACHED: 503, INTERNAL: 500, INTERRUPTED: 503 };

function need(episode: ServedEpisode | undefined): ServedEpisode {
  if (!episode) throw new AgentError('EPISODE_DONE', 'no episode yet: send reset first');
  return episode;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new AgentError('PARAMS_INVALID', `body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new AgentError('PARAMS_INVALID', `body is not JSON: ${(err as Error).message}`, { hint: 'Send a JSON object with content-type application/json.' });
  }
}

function send(res: ServerResponse, status: number, body: object): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
}

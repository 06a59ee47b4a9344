/**
 * `agent serve`'s network face: OpenEnv's protocol over a WebSocket (`/ws`, one session per
 * connection, many at once) and its HTTP routes, plus our async extension on the same socket.
 *
 * WebSocket messages (`{"type", "data"}`; a message with an `id` is answered with the same `id`
 * and may overlap others, one without is answered in order, as OpenEnv's client expects):
 * - `reset` {seed?, episode_id?, task_id?, actions?: "always" | "on_change"} → `observation` {observation, reward, done, …}
 * - `step` <action> → `observation`;  `state` → `state` {episode_id, step_count, state, seq}
 * - `dispatch` <action> → `dispatched` {trace_id}, at once
 * - `resolve` {trace_ids, timeout_ms?} → `resolved` {results: [envelope…]}
 * - `state_at` {seq} → `state`;  `rewards` {episode_id?} → `rewards` {episode_id, rewards}
 * - `subscribe` → `subscribed`, then `reward` pushes for this socket's episodes (never unasked:
 *   OpenEnv's client reads the next message as the reply to its request)
 * - `rollouts` {task_ids, n, base_url, model, sampling?, weight_version?, max_staleness?, …} (with
 *   an id) → `rollouts_accepted` {tasks, episodes} once checked, a `rollout_group` per task as its K
 *   episodes complete (token records), then
 *   `rollouts_done` {groups, episodes, dropped, rerun}; `cancel` {id} stops one (rollouts.ts)
 * - `weight_version` {version} → `weight_version`: the trainer pushed new weights (never older)
 * - `close` ends the session. A socket that goes away ends its episode as truncated, its rollouts `client_closed`.
 * HTTP: `POST /reset` (answers the envelope and a `session_token`), `POST /step` {action,
 * episode_id}, `GET /state?episode_id=`, `POST /close`, `GET /episodes/<id>/rewards`, each with the
 * session's token (`X-Session-Token`, or `session_token` in the body or query); `GET /schema`,
 * `GET /health`, `GET /metrics`, `GET /tasks`. An HTTP session is ended after `httpIdleMs` without
 * a request.
 *
 * A session belongs to its client: episode ids the server draws are 128 random bits, an episode
 * is driven and read only by the socket that opened it or the holder of its session token, and
 * anything else is `UNKNOWN_EPISODE` (never another client's data, nor whether it exists). A
 * client-chosen id names a new episode or is refused (`EPISODE_EXISTS`). Every peer is bounded
 * (ws-peer.ts): bytes queued to it, requests at once, and how long it may stay silent.
 * Security as the run server's (http-guard.ts): Host and Origin always (the upgrade included), a
 * bearer token off loopback or when given.
 */
import { randomUUID } from 'node:crypto';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import type { MetricsPage } from '../observe/prometheus.js';
import { isLoggedReward, rewardRecord, type RewardLogRecord } from '../replay/reward-log.js';
import { guardRequest, type GuardOptions } from '../server/http-guard.js';
import { baseUrl, listen } from '../server/listen.js';
import { AgentError, describeError } from '../shared/errors.js';
import { isPlainObject, MAX_JSON_DEPTH, nestsDeeperThan } from '../shared/json.js';
import { errorData, parseAction, Serialized, type SentLists, type StepEnvelope } from './protocol.js';
import type { ServedEpisode, ServedTask } from './served-episode.js';
import type { EpisodeControl } from '../run/episode-runner.js';
import { WsPeer } from './ws-peer.js';
import { runRollouts, WeightVersions, type RolloutHost } from './rollouts.js';
import { parseRolloutRequest } from './rollout-request.js';
import { GenerationGate } from '../llm/generation-gate.js';

/** The largest WebSocket message or HTTP body taken (a step's params are small; a state goes the other way). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/**
 * Finished episodes whose rewards stay readable once none is still to come (an episode with a
 * delayed reward pending is kept until it lands, is imputed or fails, whatever this says). Each costs
 * ~1.2 KB of heap; the run folder keeps every episode's rewards.
 */
const KEPT_EPISODES = 1_000;
/** Bytes queued to one WebSocket peer past which it is no longer read (ws-peer.ts), and under which reading goes on. */
const PEER_HIGH_WATER = 4 * 1024 * 1024;
const PEER_LOW_WATER = 1024 * 1024;
/** Requests one socket may have being answered at once. */
const PEER_IN_FLIGHT = 32;
/** A client-chosen episode id: it reaches file names, logs and Redis keys, so letters, digits, `.`, `_` and `-` only. */
const EPISODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** How a reset chooses the episode's start: the server's answer to {seed, task_id}. */
export interface EpisodeOpener {
  /** A new episode (not yet started) for these reset options; a typed error for a bad one. */
  open(options: { readonly seed?: number; readonly episodeId: string; readonly taskId?: string }): ServedEpisode;
  /** Hands it to the run; resolves with its control once the run has reset its instance (rejects, saying why, when it will not start). */
  start(episode: ServedEpisode): Promise<EpisodeControl>;
}

export interface ServeServerOptions {
  readonly port: number;
  readonly host: string;
  readonly token: string | undefined;
  readonly maxSessions: number;
  readonly httpIdleMs: number;
  /** A WebSocket peer from which nothing (no message, no pong) came for this long is cut off, its episode `client_lost`. */
  readonly wsTimeoutMs: number;
  readonly runId: string;
  readonly opener: EpisodeOpener;
  /** The run's events: delayed rewards go to their episode's readers and subscribers. */
  readonly events: { onAny(listener: (e: RunEvent) => void): () => void };
  /** GET /schema: the action, observation and state schemas. */
  readonly schema: object;
  readonly tasks?: readonly ServedTask[];
  /** GET /metrics: Prometheus metrics (open like /health: counts and names only). */
  readonly metrics?: () => Promise<MetricsPage>;
  /** A served suite's rollouts (`rollouts` requests); undefined for an env without tasks. */
  readonly rollouts?: RolloutHost;
  /** Finished episodes whose rewards stay readable (default {@link KEPT_EPISODES}). */
  readonly keptEpisodes?: number;
}

/** Who opened an episode: a socket (by its peer), or an HTTP client (by the session token it was given). */
type Owner = WsPeer | { readonly token: string };

/** What the server keeps of an episode for its owner: its rewards, and a subscriber to push them to. */
interface EpisodeLog {
  readonly id: string;
  readonly owner: Owner;
  /** The run's index of the episode, once it started. */
  index: number | undefined;
  readonly rewards: RewardLogRecord[];
  /** Delayed rewards expected and not landed yet (`trace_id/source`): the log stays while any is. */
  readonly pending: Set<string>;
  subscriber: ((record: RewardLogRecord) => void) | undefined;
  /** Its client moved on to another episode (a reset on the same socket): no longer live, whoever holds the socket. */
  ended?: boolean;
}

interface HttpSession {
  readonly episode: ServedEpisode;
  readonly token: string;
  readonly timer: NodeJS.Timeout;
  readonly abort: AbortController;
}

/** 128 random bits: an id no other client can guess. */
function drawId(prefix: string): string {
  return `${prefix}${randomBytes(16).toString('hex')}`;
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function unknownEpisode(id: string): AgentError {
  return new AgentError('UNKNOWN_EPISODE', `no episode '${id}' in this session`, { hint: 'A session reads and drives only the episodes it opened (over HTTP: send the session_token its reset answered). The run folder keeps every episode (rewards.jsonl, trajectories.jsonl).' });
}

export class ServeServer implements AsyncDisposable {
  readonly #o: ServeServerOptions;
  readonly #http: Server;
  readonly #ws: WebSocketServer;
  readonly #guard: GuardOptions;
  /** Every id taken on this server (live, starting, or finished and kept), with what is kept of it. */
  readonly #byId = new Map<string, EpisodeLog>();
  /** The same logs by the run's episode index, oldest first (a Map keeps insertion order). */
  readonly #logs = new Map<number, EpisodeLog>();
  readonly #httpSessions = new Map<string, HttpSession>();
  readonly #peers = new Set<WsPeer>();
  readonly #liveness: NodeJS.Timeout;
  readonly #unsubscribe: () => void;
  port = 0;

  private constructor(options: ServeServerOptions) {
    this.#o = options;
    this.#guard = { host: options.host, ...(options.token !== undefined ? { token: options.token } : {}), open: new Set(['/health', '/metrics']), tokenHint: 'the token agent serve was given (--token or AGENT_TOKEN)' };
    this.#ws = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
    this.#http = createServer((req, res) => void this.#route(req, res).catch((err: unknown) => send(res, 500, { error: describeError(err) })));
    this.#http.keepAliveTimeout = 5_000;
    this.#http.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => this.#upgrade(req, socket, head));
    this.#unsubscribe = options.events.onAny((e) => this.#onRunEvent(e));
    // One timer for every peer: a tick at a sixth of the timeout pings the quiet ones and cuts off the silent ones.
    this.#liveness = setInterval(() => {
      const now = performance.now();
      for (const peer of this.#peers) peer.check(now, options.wsTimeoutMs);
    }, Math.max(10, Math.floor(options.wsTimeoutMs / 6)));
    this.#liveness.unref();
  }

  static async start(options: ServeServerOptions): Promise<ServeServer> {
    const server = new ServeServer(options);
    try {
      server.port = await listen(server.#http, options.host, options.port);
    } catch (err) {
      await server[Symbol.asyncDispose]();
      throw err;
    }
    return server;
  }

  get url(): string {
    return baseUrl(this.#o.host, this.port);
  }

  get sessions(): number {
    return this.#peers.size + this.#httpSessions.size;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#unsubscribe();
    clearInterval(this.#liveness);
    for (const s of this.#httpSessions.values()) {
      clearTimeout(s.timer);
      s.abort.abort();
    }
    this.#httpSessions.clear();
    for (const peer of this.#peers) peer.ws.terminate();
    this.#ws.close();
    this.#http.closeAllConnections();
    await new Promise<void>((resolve) => this.#http.close(() => resolve()));
  }

  #onRunEvent(e: RunEvent): void {
    if (e.type === 'trace_settled') return this.#pendingOf(e);
    if (!isLoggedReward(e)) return;
    const log = this.#logs.get(e.episode);
    if (!log) return;
    const record = rewardRecord(e);
    log.rewards.push(record);
    if (e.type === 'reward_expected') log.pending.add(`${e.trace_id}/${e.source}`);
    else if (e.type !== 'reward_late' && log.pending.size > 0) log.pending.delete(`${e.trace_id}/${e.source}`);
    log.subscriber?.(record);
  }

  /** A step's delayed rewards still to come: its episode's log stays until they land. */
  #pendingOf(step: SettledStepEvent): void {
    for (const source in step.rewards) {
      if (step.rewards[source]?.status !== 'pending') continue;
      this.#logs.get(step.episode)?.pending.add(`${step.trace_id}/${source}`);
    }
  }

  /** A reset: the new episode, once the run has reset its instance. */
  async #reset(data: unknown, owner: Owner, current?: ServedEpisode): Promise<ServedEpisode> {
    const o = isPlainObject(data) ? data : {};
    const field = (name: string, ok: (v: unknown) => boolean, want: string): void => {
      if (o[name] !== undefined && o[name] !== null && !ok(o[name])) throw new AgentError('PARAMS_INVALID', `reset /${name} must be ${want}`, { hint: 'Reset takes {"seed"?: integer, "episode_id"?: string, "task_id"?: string, "actions"?: "always" | "on_change"}.' });
    };
    field('seed', Number.isInteger, 'an integer');
    field('episode_id', (v) => typeof v === 'string' && EPISODE_ID.test(v), '1 to 128 letters, digits, ".", "_" or "-" (starting with a letter or digit)');
    field('task_id', (v) => typeof v === 'string', 'a string (a task id of the served suite)');
    field('actions', (v) => v === 'always' || v === 'on_change', '"always" (the default) or "on_change" (a step\'s reply lists the actions only when they changed)');
    const asked = typeof o['episode_id'] === 'string' ? o['episode_id'] : undefined;
    if (asked !== undefined && this.#byId.has(asked)) {
      throw new AgentError('EPISODE_EXISTS', `reset /episode_id: episode '${asked}' already exists on this server`, { hint: 'An id names a new episode: give each one its own, or none (the server draws one).' });
    }
    const id = asked ?? drawId('ep-');
    const episode = this.#o.opener.open({ episodeId: id, ...(typeof o['seed'] === 'number' ? { seed: o['seed'] } : {}), ...(typeof o['task_id'] === 'string' ? { taskId: o['task_id'] } : {}) });
    // The id is taken from now on: a second reset naming it while this one starts is refused.
    const log: EpisodeLog = { id, owner, index: undefined, rewards: [], pending: new Set(), subscriber: undefined };
    this.#byId.set(id, log);
    current?.end();
    const previous = current && this.#byId.get(current.id);
    if (previous) previous.ended = true;
    let control;
    try {
      control = await this.#o.opener.start(episode);
    } catch (err) {
      this.#byId.delete(id);
      throw err;
    }
    log.index = control.episode;
    this.#logs.set(control.episode, log);
    this.#trimLogs();
    return episode;
  }

  /** Keeps the logs of the last `keptEpisodes` episodes (and every live one, and every one with a reward still to come). */
  #trimLogs(): void {
    for (const [index, log] of this.#logs) {
      if (this.#logs.size <= (this.#o.keptEpisodes ?? KEPT_EPISODES)) break;
      // Live: an HTTP session's, or a connected socket's current episode (not every episode it ever had).
      if (this.#httpSessions.has(log.id) || (!log.ended && log.owner instanceof WsPeer && this.#peers.has(log.owner))) continue;
      if (log.pending.size > 0) continue;
      this.#logs.delete(index);
      this.#byId.delete(log.id);
    }
  }

  /** An episode's rewards, for its owner only. */
  #rewardsOf(id: string, owner: (log: EpisodeLog) => boolean): { episode_id: string; episode: number; rewards: RewardLogRecord[] } {
    const log = this.#byId.get(id);
    if (!log || log.index === undefined || !owner(log)) throw unknownEpisode(id);
    return { episode_id: id, episode: log.index, rewards: log.rewards };
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
        ws.send(JSON.stringify({ type: 'error', data: Object.assign(errorData(new AgentError('CAPACITY_REACHED', `every session of this server is taken (${this.#o.maxSessions})`, { hint: 'Close a session, or start the server with a larger --max-sessions.' })), { max_sessions: this.#o.maxSessions }) }));
        ws.close(1013, 'capacity reached');
        return;
      }
      this.#connect(ws);
    });
  }

  #connect(ws: WebSocket): void {
    const abort = new AbortController();
    let episode: ServedEpisode | undefined;
    /** Rewards are pushed only once asked for: OpenEnv's client reads the next message as its reply. */
    let subscribed = false;
    let inOrder: Promise<void> = Promise.resolve();
    /** This socket's rollout requests by id (cancel names one), and the weight versions its trainer declared. */
    const rollouts = new Map<unknown, AbortController>();
    const trainer = { id: randomUUID(), versions: new WeightVersions(), gate: new GenerationGate() };
    const { versions, gate } = trainer;
    // Workers running this socket's rollouts follow its weights and pause.
    const tell = (): void => this.#o.rollouts?.workers?.tell(trainer.id, { version: versions.current ?? null, paused: gate.paused });
    const reply = (message: object): void => peer.send(JSON.stringify(message));
    /** The lists this socket's client was last sent, when its episode's reset asked for them on change only. */
    let sent: SentLists | undefined;
    // A reset's or a step's reply, serialized with its tool lists spliced in (each is the same few lists, step after step).
    const observed = (envelope: StepEnvelope): Serialized => new Serialized(`{"type":"observation","data":${need(episode).tools.envelopeJson(envelope, sent)}}`);
    const mine = (log: EpisodeLog): boolean => log.owner === peer;
    const handle = async (message: Record<string, unknown>, release: () => void): Promise<object | undefined> => {
      const data = message['data'] ?? {};
      const args = isPlainObject(data) ? data : {};
      switch (message['type']) {
        case 'reset': {
          episode = await this.#reset(data, peer, episode);
          // A new episode's reply always lists its actions.
          sent = args['actions'] === 'on_change' ? {} : undefined;
          // Rewards of every episode this socket opened go to it once it subscribed.
          const log = this.#byId.get(episode.id);
          if (log) log.subscriber = (record) => subscribed && reply({ type: 'reward', data: Object.assign({}, record, { episode_id: log.id }) });
          return observed(episode.resetEnvelope());
        }
        case 'step':
          return observed(await need(episode).step(parseAction(data, '/data'), abort.signal));
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
          return { type: 'rewards', data: this.#rewardsOf(typeof args['episode_id'] === 'string' ? args['episode_id'] : need(episode).id, mine) };
        case 'subscribe':
          subscribed = true;
          return { type: 'subscribed', data: {} };
        case 'rollouts': {
          const host = this.#o.rollouts;
          if (!host) throw new AgentError('PARAMS_INVALID', 'rollouts: this server serves an env without tasks', { hint: 'Serve a suite (an env with tasks/<split>.jsonl, e.g. fixtures/lookup) to ask for rollouts of its tasks.' });
          const id = message['id'];
          if (id === undefined) throw new AgentError('PARAMS_INVALID', 'rollouts needs an id: its groups are sent as they complete, each with the request\'s id', { hint: 'Send {"type": "rollouts", "id": 1, "data": {…}}.' });
          if (rollouts.has(id)) throw new AgentError('PARAMS_INVALID', `rollouts: request ${JSON.stringify(id)} is already running on this socket`, { hint: 'Give each request its own id.' });
          const request = parseRolloutRequest(data, host);
          if (request.weightVersion !== undefined) {
            versions.declare(request.weightVersion, 'rollouts /data/weight_version');
            tell();
          }
          const cancel = new AbortController();
          rollouts.set(id, cancel);
          // Checked and started: a client can raise a bad request at once instead of at its first group.
          // Groups asked for: each task's one, or those drawn from the pool (episodes: as many as a group each, without replacements).
          const groups = request.draw?.groups ?? request.taskIds.length;
          reply({ type: 'rollouts_accepted', id, data: { tasks: request.taskIds.length, groups, episodes: groups * request.n } });
          // A stream for minutes: it must not hold one of the socket's places for requests (a cancel behind it would wait).
          release();
          try {
            const summary = await runRollouts(request, host, trainer, (group) => reply({ type: 'rollout_group', id, data: group }), AbortSignal.any([abort.signal, cancel.signal]));
            return { type: 'rollouts_done', data: summary };
          } finally {
            rollouts.delete(id);
          }
        }
        case 'cancel': {
          const running = rollouts.get(args['id']);
          running?.abort(new AgentError('INTERRUPTED', 'the client cancelled the rollouts'));
          return { type: 'cancelled', data: { id: args['id'] ?? null, running: running !== undefined } };
        }
        case 'weight_version':
          versions.declare(args['version'], 'weight_version /data/version');
          tell();
          return { type: 'weight_version', data: { version: versions.current ?? null } };
        // The trainer pushes weights between these: no completion of this socket's rollouts is sent meanwhile.
        case 'pause':
          gate.pause();
          tell();
          return { type: 'paused', data: { waiting: gate.waiting } };
        case 'resume': {
          const released = gate.resume();
          tell();
          return { type: 'resumed', data: { released } };
        }
        case 'close':
          ws.close(1000);
          return undefined;
        default:
          return { type: 'error', data: { message: `unknown message type '${String(message['type'])}'`, code: 'UNKNOWN_TYPE', hint: 'Send reset, step, state, dispatch, resolve, state_at, rewards, subscribe, rollouts, cancel, weight_version, pause, resume or close.' } };
      }
    };
    const onMessage = (raw: RawData, isBinary: boolean, release: () => void): Promise<void> => {
      const text = isBinary ? Buffer.from(raw as Buffer).toString('utf8') : String(raw);
      let message: unknown;
      if (nestsDeeperThan(text)) {
        reply({ type: 'error', data: { message: `message nests deeper than ${MAX_JSON_DEPTH} levels`, code: 'VALIDATION_ERROR', hint: 'Params, states and observations are JSON documents, not deep chains: flatten the value.' } });
        return Promise.resolve();
      }
      try {
        message = JSON.parse(text);
      } catch (err) {
        reply({ type: 'error', data: { message: `invalid JSON: ${(err as Error).message}`, code: 'INVALID_JSON' } });
        return Promise.resolve();
      }
      if (!isPlainObject(message)) {
        reply({ type: 'error', data: { message: 'a message must be an object {"type", "data"}', code: 'VALIDATION_ERROR' } });
        return Promise.resolve();
      }
      const request = message;
      const id = request['id'];
      const run = (): Promise<void> =>
        handle(request, release).then(
          (answer) => {
            if (answer instanceof Serialized) peer.send(answer.withId(id));
            else if (answer) reply(id === undefined ? answer : Object.assign({}, answer, { id }));
          },
          (err: unknown) => reply({ type: 'error', data: errorData(err), ...(id === undefined ? {} : { id }) }),
        );
      if (id !== undefined) return run();
      inOrder = inOrder.then(run);
      return inOrder;
    };
    const peer = new WsPeer(ws, { highWater: PEER_HIGH_WATER, lowWater: PEER_LOW_WATER, maxInFlight: PEER_IN_FLIGHT, maxMessageBytes: MAX_MESSAGE_BYTES, onMessage });
    this.#peers.add(peer);
    ws.on('close', () => {
      this.#peers.delete(peer);
      abort.abort(new AgentError('INTERRUPTED', 'the client went away'));
      episode?.end(peer.lost ? 'client_lost' : 'client_closed');
    });
    // ws closes the socket itself on a protocol error (1009 for a message over the limit, 1002 …): let that close go out.
    ws.on('error', () => undefined);
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
      const queryToken = url.searchParams.get('session_token');
      if (req.method === 'GET' && path === '/state') return send(res, 200, this.#httpSession(url.searchParams.get('episode_id'), sessionToken(req, queryToken)).episode.state());
      const rewards = /^\/episodes\/([^/]+)\/rewards$/.exec(path);
      if (req.method === 'GET' && rewards) {
        const token = sessionToken(req, queryToken);
        return send(res, 200, this.#rewardsOf(decodeId(rewards[1] as string), (log) => token !== undefined && !(log.owner instanceof WsPeer) && sameToken(log.owner.token, token)));
      }
      if (req.method !== 'POST' || !['/reset', '/step', '/close'].includes(path)) {
        return send(res, 404, { error: `no route ${req.method ?? ''} ${path}: POST /reset, POST /step, POST /close, GET /state, GET /schema, GET /health, GET /metrics, GET /tasks, GET /episodes/<id>/rewards, or a WebSocket at /ws` });
      }
      const body = await readJson(req);
      const o = isPlainObject(body) ? body : {};
      if (path === '/reset') {
        if (this.sessions >= this.#o.maxSessions) throw new AgentError('CAPACITY_REACHED', `every session of this server is taken (${this.#o.maxSessions})`, { hint: 'Close a session (POST /close), or start the server with a larger --max-sessions.' });
        const token = drawId('');
        const episode = await this.#reset(body, { token });
        this.#openHttp(episode, token);
        return send(res, 200, Object.assign(episode.resetEnvelope(), { session_token: token }));
      }
      const session = this.#httpSession(typeof o['episode_id'] === 'string' ? o['episode_id'] : null, sessionToken(req, typeof o['session_token'] === 'string' ? o['session_token'] : queryToken));
      const { episode } = session;
      if (path === '/close') {
        episode.end();
        return send(res, 200, { episode_id: episode.id, closed: true });
      }
      session.timer.refresh();
      const timeoutS = o['timeout_s'];
      const envelope = typeof timeoutS === 'number' && timeoutS >= 0 ? (await episode.resolve([episode.dispatch(parseAction(o['action'], '/action'))], { signal: session.abort.signal, timeoutMs: timeoutS * 1000 }))[0] : await episode.step(parseAction(o['action'], '/action'), session.abort.signal);
      return send(res, 200, envelope as object);
    } catch (err) {
      const data = errorData(err);
      return send(res, STATUS[data.code] ?? 400, { error: data.message, ...data });
    }
  }

  /** The live HTTP session of `id`, for the holder of its token; every other case is the same UNKNOWN_EPISODE. */
  #httpSession(id: string | null, token: string | undefined): HttpSession {
    if (id === null) throw new AgentError('PARAMS_INVALID', 'episode_id is missing', { hint: 'Send the episode_id that POST /reset answered (in its observation), as ?episode_id= or in the body, with its session_token.' });
    const session = this.#httpSessions.get(id);
    if (!session || token === undefined || !sameToken(session.token, token)) throw unknownEpisode(id);
    return session;
  }

  /** An HTTP session lives while requests come: each one restarts its idle timer. */
  #openHttp(episode: ServedEpisode, token: string): void {
    const session: HttpSession = { episode, token, timer: setTimeout(() => episode.end(), this.#o.httpIdleMs), abort: new AbortController() };
    session.timer.unref();
    this.#httpSessions.set(episode.id, session);
    void episode.closed.then(() => {
      clearTimeout(session.timer);
      session.abort.abort(new AgentError('INTERRUPTED', 'the episode ended'));
      if (this.#httpSessions.get(episode.id) === session) this.#httpSessions.delete(episode.id);
    });
  }
}

const STATUS: Readonly<Record<string, number>> = { UNKNOWN_EPISODE: 404, EPISODE_EXISTS: 409, CAPACITY_REACHED: 503, INTERNAL: 500, INTERRUPTED: 503 };

function need(episode: ServedEpisode | undefined): ServedEpisode {
  if (!episode) throw new AgentError('EPISODE_DONE', 'no episode yet: send reset first');
  return episode;
}

/** An HTTP session's token: the `X-Session-Token` header, else the one in the body or query. */
function sessionToken(req: IncomingMessage, fallback: string | null | undefined): string | undefined {
  const header = req.headers['x-session-token'];
  if (typeof header === 'string' && header !== '') return header;
  return fallback ?? undefined;
}

function decodeId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new AgentError('PARAMS_INVALID', `'${raw}' has a malformed percent-escape`, { hint: 'Ask for /episodes/<episode_id>/rewards with the id reset answered.' });
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_MESSAGE_BYTES) throw new AgentError('PARAMS_INVALID', `body over ${MAX_MESSAGE_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  if (nestsDeeperThan(text)) throw new AgentError('PARAMS_INVALID', `body nests deeper than ${MAX_JSON_DEPTH} levels`, { hint: 'Params are JSON documents, not deep chains: flatten the value.' });
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

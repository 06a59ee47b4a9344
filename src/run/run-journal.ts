/**
 * A run's journal in Redis: everything `agent run --resume` needs to continue a run after its
 * process died (kill -9, OOM, a lost node). Beside the episodes' state histories (RedisStateStore):
 * - `meta`: the run's options (env, config, seed, policy, out), its status, and write counters;
 * - `episodes`: per episode, running (with its instance and initial state) or finished (with its
 *   episodes.jsonl record and episode_finished event);
 * - `inflight`: per episode, the call dispatched and not yet committed (a run steps each episode
 *   one call at a time), so a resume knows which calls a crash cut off;
 * - `steps` and `rewards`: streams of the settled steps (trace_settled events) and reward log
 *   records, the run folder's trajectories.jsonl and rewards.jsonl as committed;
 * - `lease`: which process owns the run (pid, host), renewed while it lives.
 *
 * The writes of one turn of the event loop go to Redis together, in one Lua script call that
 * numbers them: stream entry n is written only after n-1, and a write resent after a lost reply is
 * recognised, never doubled. A gap means Redis lost acknowledged writes (restarted without them on
 * disk): `STORE_WRITES_LOST`, never silence.
 * Keys are `agent:<run-id>:{<run-id>}:<name>`: under the run's prefix, with one hash tag (one Redis
 * Cluster slot, so the scripts may touch them all).
 */
import { hostname } from 'node:os';
import type { Cluster, Redis } from 'ioredis';
import { raceAbort } from '../shared/abort.js';
import { processAlive } from '../shared/process.js';
import { AgentError, describeError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import type { RewardLogRecord } from '../replay/reward-log.js';
import type { RunConfig, RunEvent, SettledStepEvent } from '../events/run-events.js';

type Client = Redis | Cluster;

/** What a resume needs to run the same run again: the options `Run.prepare` took. */
export interface JournalRun {
  readonly run_id: string;
  readonly started_at: number;
  readonly env_dir: string;
  readonly out: string;
  readonly config: RunConfig;
  readonly tool_options?: Readonly<Record<string, JsonValue>>;
  readonly reward_sources?: Readonly<Record<string, unknown>>;
  /** Set when the run's episodes run on workers: the queue they take them from. */
  readonly distributed?: { readonly queue: string };
  /** The coordinator's env (see env-fingerprint.ts): a worker whose env differs refuses the run's episodes. */
  readonly env_fingerprint?: string;
  /** Set when the run was served (`agent serve`): the env or suite folder and the split its tasks came from, to serve them again on resume. */
  readonly served?: ServedFrom;
}

export interface ServedFrom {
  readonly spec: string;
  readonly split: string;
}

export type EpisodeFinishedEvent = Extract<RunEvent, { type: 'episode_finished' }>;

export type JournalEpisode =
  | { readonly status: 'running'; readonly instance_id: string; readonly initial_state_id: string; readonly started_at: number }
  /** `record` is missing when the episode never started (its reset failed). */
  | { readonly status: 'finished'; readonly record?: EpisodeRecord; readonly event: EpisodeFinishedEvent };

/** The call an episode had in flight: `trace_id` is the id its dispatch was about to get. */
export interface InflightCall {
  readonly trace_id: string;
  readonly action: string;
  readonly params: Readonly<Record<string, JsonValue>>;
  readonly available_actions: readonly string[];
}

export interface JournalContents {
  readonly run: JournalRun;
  readonly episodes: ReadonlyMap<number, JournalEpisode>;
  readonly inflight: ReadonlyMap<number, InflightCall>;
  /** Every committed step, in commit order. */
  readonly steps: readonly SettledStepEvent[];
  readonly rewards: readonly RewardLogRecord[];
}

export interface LeaseOwner {
  readonly pid: number;
  readonly host: string;
}

/**
 * Every journal write of one turn of the event loop, in the order issued, as one script call.
 * KEYS: meta, steps, rewards, inflight, episodes. ARGV: the ops, each a letter and its arguments:
 * `S n json episode` step n (and its episode's call is no longer in flight), `R n json` reward
 * record n, `I episode json` a call in flight, `E episode json` an episode's entry, `F episode json`
 * a finished episode's entry (and nothing of it in flight). Stream entry n is written only after
 * n-1; one already there (a resend after a lost reply) is skipped, a missing one is `GAP`.
 */
const WRITE_SCRIPT = `
local i = 1
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'S' or op == 'R' then
    local field, stream = 'steps', KEYS[2]
    if op == 'R' then field, stream = 'rewards', KEYS[3] end
    local n = tonumber(ARGV[i + 1])
    local last = tonumber(redis.call('HGET', KEYS[1], field) or '0')
    if last >= n then
      if not redis.call('XRANGE', stream, n .. '-0', n .. '-0')[1] then return redis.error_reply('GAP ' .. field .. ' ' .. last .. ' ' .. n) end
    elseif last ~= n - 1 then
      return redis.error_reply('GAP ' .. field .. ' ' .. last .. ' ' .. n)
    else
      redis.call('XADD', stream, n .. '-0', 'd', ARGV[i + 2])
      redis.call('HSET', KEYS[1], field, n)
    end
    if op == 'S' then
      redis.call('HDEL', KEYS[4], ARGV[i + 3])
      i = i + 4
    else
      i = i + 3
    end
  else
    if op == 'I' then
      redis.call('HSET', KEYS[4], ARGV[i + 1], ARGV[i + 2])
    else
      redis.call('HSET', KEYS[5], ARGV[i + 1], ARGV[i + 2])
      if op == 'F' then redis.call('HDEL', KEYS[4], ARGV[i + 1]) end
    end
    i = i + 3
  end
end
return 1`;

/** KEYS: lease. ARGV: owner JSON, ms. Renews the lease only while this process holds it. */
const RENEW_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

/** How long a lease outlives its owner's last renewal: a resume on another host waits this long. */
const LEASE_MS = 15_000;
const READ_CHUNK = 5_000;
/** Arguments per script call at most: a turn that issues more sends several (a script blocks Redis while it runs). */
const BATCH_ARGS = 4_096;

export class RunJournal implements Disposable {
  readonly runId: string;
  readonly #redis: Client;
  readonly #keys: { meta: string; episodes: string; inflight: string; steps: string; rewards: string; lease: string };
  /** Entries issued per stream: the number the next one takes. */
  #issued = { steps: 0, rewards: 0 };
  /** The writes issued this turn and not sent yet, and what their callers wait on. */
  #batch: { readonly args: (string | number)[]; readonly done: Promise<void> } | undefined;
  /** The newest write issued: Redis answers in order, so once it settles every earlier one has. */
  #tail: Promise<unknown> = Promise.resolve();
  #failure: AgentError | undefined;
  /** Told of the first write that fails (the run stops on it). */
  onFailure: (err: AgentError) => void = () => undefined;
  #owner: string | undefined;
  #renewal: NodeJS.Timeout | undefined;

  /** Keys under `prefix` (the run's own, `agent:<run-id>:` by default). */
  constructor(redis: Client, runId: string, prefix = `agent:${runId}:`) {
    this.#redis = redis;
    this.runId = runId;
    const base = `${prefix}{${runId}}:`;
    this.#keys = { meta: `${base}meta`, episodes: `${base}episodes`, inflight: `${base}inflight`, steps: `${base}steps`, rewards: `${base}rewards`, lease: `${base}lease` };
    redis.defineCommand('agentJournalWrite', { lua: WRITE_SCRIPT, numberOfKeys: 5 });
    redis.defineCommand('agentLeaseRenew', { lua: RENEW_SCRIPT, numberOfKeys: 1 });
  }

  /** The first write that failed, if any: the run stops on it. */
  get failure(): AgentError | undefined {
    return this.#failure;
  }

  /** Start a new run's journal; refuses to overwrite one. */
  async create(run: JournalRun, signal?: AbortSignal): Promise<void> {
    const ok = await raceAbort(this.#redis.hsetnx(this.#keys.meta, 'run', JSON.stringify(run)), signal);
    if (ok !== 1) throw new AgentError('BAD_USAGE', `run ${run.run_id} already has a journal in Redis`, { hint: 'Resume it with --resume, or start a new run.' });
    await raceAbort(this.#redis.hset(this.#keys.meta, 'status', 'running', 'steps', 0, 'rewards', 0), signal);
  }

  /**
   * Take the run: refused while another live process holds it. A lease left by a process that is
   * gone (same host, pid not running) is taken at once; one from another host after it lapses.
   */
  async acquire(signal?: AbortSignal): Promise<void> {
    const me: LeaseOwner = { pid: process.pid, host: hostname() };
    const owner = JSON.stringify({ ...me, token: Math.random().toString(36).slice(2) });
    const set = await raceAbort(this.#redis.set(this.#keys.lease, owner, 'PX', LEASE_MS, 'NX'), signal);
    if (set !== 'OK') {
      const [held, ttl] = await raceAbort(Promise.all([this.#redis.get(this.#keys.lease), this.#redis.pttl(this.#keys.lease)]), signal);
      const holder = parseJson(held ?? 'null', this.#keys.lease) as LeaseOwner | null;
      if (holder && !(holder.host === me.host && !processAlive(holder.pid))) {
        throw new AgentError('BAD_USAGE', `run ${this.runId} is running in pid ${holder.pid} on ${holder.host}`, {
          hint: holder.host === me.host ? 'Stop that process first (Ctrl-C), then resume.' : `If that process is gone, its lease lapses in ${Math.ceil(Math.max(0, ttl) / 1000)} s; resume then.`,
        });
      }
      await raceAbort(this.#redis.set(this.#keys.lease, owner, 'PX', LEASE_MS), signal);
    }
    this.#owner = owner;
    this.#renewal = setInterval(() => {
      (this.#redis as unknown as { agentLeaseRenew: (...a: (string | number)[]) => Promise<number> }).agentLeaseRenew(this.#keys.lease, owner, LEASE_MS).catch(() => undefined);
    }, LEASE_MS / 3);
    this.#renewal.unref();
  }

  /** The run's options as journaled, or undefined when Redis has no run of that id. */
  async readRun(signal?: AbortSignal): Promise<JournalRun | undefined> {
    const run = await raceAbort(this.#redis.hget(this.#keys.meta, 'run'), signal);
    return run === null ? undefined : parseRun(run, this.#keys.meta);
  }

  /** Everything in the journal, or undefined when Redis has no run of that id. */
  async read(signal?: AbortSignal): Promise<JournalContents | undefined> {
    const meta = await raceAbort(this.#redis.hgetall(this.#keys.meta), signal);
    if (meta['run'] === undefined) return undefined;
    const run = parseRun(meta['run'], this.#keys.meta);
    const [episodesRaw, inflightRaw] = await raceAbort(Promise.all([this.#redis.hgetall(this.#keys.episodes), this.#redis.hgetall(this.#keys.inflight)]), signal);
    const episodes = new Map<number, JournalEpisode>();
    for (const [k, v] of Object.entries(episodesRaw)) episodes.set(episodeField(k, this.#keys.episodes), parseEpisode(v, this.#keys.episodes, k));
    const inflight = new Map<number, InflightCall>();
    for (const [k, v] of Object.entries(inflightRaw)) inflight.set(episodeField(k, this.#keys.inflight), parseInflight(v, this.#keys.inflight, k));
    const steps = await this.#readStream(this.#keys.steps, signal, parseStep);
    const rewards = await this.#readStream(this.#keys.rewards, signal, parseRewardRecord);
    this.#issued = { steps: Number(meta['steps'] ?? 0), rewards: Number(meta['rewards'] ?? 0) };
    if (steps.length !== this.#issued.steps || rewards.length !== this.#issued.rewards) {
      throw new AgentError('STATE_CORRUPT', `Redis key '${this.#keys.steps}' holds ${steps.length} steps and ${rewards.length} reward records; the journal counted ${this.#issued.steps} and ${this.#issued.rewards}`, {
        hint: 'Something other than the toolkit changed the run\'s keys. Restore them from a backup.',
      });
    }
    return { run, episodes, inflight, steps, rewards };
  }

  async #readStream<T>(key: string, signal: AbortSignal | undefined, parse: (text: string, key: string, where: string) => T): Promise<T[]> {
    const out: T[] = [];
    let from = '-';
    for (;;) {
      const chunk = await raceAbort(this.#redis.xrange(key, from, '+', 'COUNT', READ_CHUNK), signal);
      for (const [id, fields] of chunk) {
        const at = fields.indexOf('d');
        if (at < 0 || fields[at + 1] === undefined) throw corrupt(key, id, 'an entry needs a d field');
        out.push(parse(fields[at + 1] as string, key, id));
      }
      if (chunk.length < READ_CHUNK) return out;
      from = `(${(chunk[chunk.length - 1] as [string, string[]])[0]}`;
    }
  }

  async episodeStarted(episode: number, entry: Extract<JournalEpisode, { status: 'running' }>, signal?: AbortSignal): Promise<void> {
    await raceAbort(this.#write('E', episode, JSON.stringify(entry)), signal);
  }

  /** Before the call starts: if the process dies before it commits, a resume finds it here. */
  async dispatching(episode: number, call: InflightCall, signal?: AbortSignal): Promise<void> {
    await raceAbort(this.#write('I', episode, JSON.stringify(call)), signal);
  }

  /** A settled step: appended to `steps`, and the episode's call is no longer in flight. `json`: the event's JSON, when the caller has it. */
  step(event: SettledStepEvent, json = JSON.stringify(event)): Promise<void> {
    return this.#write('S', ++this.#issued.steps, json, event.episode);
  }

  reward(record: RewardLogRecord): Promise<void> {
    return this.#write('R', ++this.#issued.rewards, JSON.stringify(record));
  }

  async episodeFinished(episode: number, record: EpisodeRecord | undefined, event: EpisodeFinishedEvent, signal?: AbortSignal): Promise<void> {
    const entry: JournalEpisode = { status: 'finished', ...(record ? { record } : {}), event };
    await raceAbort(this.#write('F', episode, JSON.stringify(entry)), signal);
  }

  /** Resolves once every write issued so far has been answered (POST /rewards replies after this). */
  async flushed(): Promise<void> {
    await this.#tail.catch(() => undefined);
    if (this.#failure) throw this.#failure;
  }

  /** Runs `fn` once every write issued so far has been answered: what the run folder shows is in Redis first. */
  after(fn: () => void): void {
    void this.#tail.then(fn, fn);
  }

  /** `running` or `interrupted`: for people reading Redis (a resume handles both the same). */
  async setStatus(status: 'running' | 'interrupted', signal?: AbortSignal): Promise<void> {
    await raceAbort(this.#redis.hset(this.#keys.meta, 'status', status), signal);
  }

  /** A completed run: its folder holds everything, so its keys go. */
  async retire(signal?: AbortSignal): Promise<void> {
    const k = this.#keys;
    await raceAbort(this.#redis.del(k.meta, k.episodes, k.inflight, k.steps, k.rewards, k.lease), signal);
  }

  /**
   * Every write goes through here: queued with the others of this turn of the event loop, sent as
   * one script call once the turn's promise callbacks have run (a wave of agents resumed by one
   * reply then shares a round trip), in the order issued. Never a caller's abort: a write that was
   * issued completes, or fails the run.
   */
  #write(...op: (string | number)[]): Promise<void> {
    let batch = this.#batch;
    if (!batch || batch.args.length >= BATCH_ARGS) {
      const args: (string | number)[] = [];
      const k = this.#keys;
      const sent = new Promise<unknown>((resolve, reject) => {
        process.nextTick(() => {
          if (this.#batch?.args === args) this.#batch = undefined;
          const write = (this.#redis as unknown as { agentJournalWrite: (...a: (string | number)[]) => Promise<unknown> }).agentJournalWrite;
          write.call(this.#redis, k.meta, k.steps, k.rewards, k.inflight, k.episodes, ...args).then(resolve, reject);
        });
      });
      batch = this.#batch = { args, done: this.#track(sent) };
    }
    for (const a of op) batch.args.push(a);
    return batch.done;
  }

  #track(write: Promise<unknown>): Promise<void> {
    const done = write.then(
      () => undefined,
      (err: unknown) => {
        const message = describeError(err);
        const gap = /GAP (\w+) (\d+) (\d+)/.exec(message);
        const failure = gap
          ? new AgentError('STORE_WRITES_LOST', `Redis lost acknowledged writes of run ${this.runId}: its ${gap[1]} journal ends at entry ${gap[2]}, this process had written up to ${Number(gap[3]) - 1}`, {
              hint: 'Redis restarted without its last writes on disk (appendfsync everysec, or no AOF). Resume the run: it continues from what Redis kept and reports what was lost.',
            })
          : new AgentError('STORE_UNAVAILABLE', `writing the journal of run ${this.runId} to Redis failed: ${message}`, { cause: err, hint: 'Check Redis, then resume the run with --resume.' });
        if (!this.#failure) {
          this.#failure = failure;
          this.onFailure(failure);
        }
        throw failure;
      },
    );
    this.#tail = done.catch(() => undefined);
    return done;
  }

  [Symbol.dispose](): void {
    clearInterval(this.#renewal);
    this.#renewal = undefined;
  }

  /** Give the run up (an interrupted run, on exit): another process may resume it at once. */
  async release(): Promise<void> {
    this[Symbol.dispose]();
    if (this.#owner === undefined) return;
    const owner = this.#owner;
    this.#owner = undefined;
    await this.#redis.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, this.#keys.lease, owner).catch(() => undefined);
  }
}

function corrupt(key: string, where: string, what: string): AgentError {
  return new AgentError('STATE_CORRUPT', `Redis key '${key}' (${where}) is malformed: ${what}`, { hint: 'Something other than the toolkit wrote there. Restore it from a backup.' });
}

/**
 * What the journal reads back is checked for the shape it wrote: valid JSON of another shape (a
 * hand edit, another program's key) is STATE_CORRUPT naming the key, never a TypeError later.
 */
function shaped<T>(value: unknown, check: (v: Record<string, unknown>) => boolean, key: string, where: string, what: string): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !check(value as Record<string, unknown>)) throw corrupt(key, where, what);
  return value as T;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isInt = (v: unknown): boolean => Number.isInteger(v);
const isString = (v: unknown): boolean => typeof v === 'string';

function isJournalRun(v: Record<string, unknown>): boolean {
  const c = v['config'];
  const served = v['served'];
  return (served === undefined || (isObject(served) && isString(served['spec']) && isString(served['split']))) && (v['env_fingerprint'] === undefined || isString(v['env_fingerprint'])) && isString(v['run_id']) && isString(v['env_dir']) && isString(v['out']) && typeof v['started_at'] === 'number' && isObject(c) && isInt(c['episodes']) && isInt(c['concurrency']) && isInt(c['max_steps']) && isInt(c['seed']) && isString(c['policy']);
}

function isJournalEpisode(v: Record<string, unknown>): boolean {
  if (v['status'] === 'running') return isString(v['instance_id']) && isString(v['initial_state_id']) && typeof v['started_at'] === 'number';
  const e = v['event'];
  return v['status'] === 'finished' && isObject(e) && e['type'] === 'episode_finished' && isInt(e['episode']) && isInt(e['steps']) && typeof e['reward'] === 'number' && isString(e['reason']) && (v['record'] === undefined || isObject(v['record']));
}

function isInflightCall(v: Record<string, unknown>): boolean {
  return isString(v['trace_id']) && isString(v['action']) && isObject(v['params']) && Array.isArray(v['available_actions']);
}

function isSettledStep(v: Record<string, unknown>): boolean {
  return v['type'] === 'trace_settled' && isString(v['trace_id']) && isString(v['instance_id']) && isInt(v['episode']) && isInt(v['step']) && isInt(v['seq']);
}

function isRewardRecord(v: Record<string, unknown>): boolean {
  return isString(v['type']) && isString(v['trace_id']) && isInt(v['episode']) && isInt(v['step']) && isString(v['source']);
}

export const parseRun = (text: string, key: string): JournalRun => shaped(parseJson(text, key, 'run'), isJournalRun, key, 'run', 'a run needs run_id, env_dir, out and config');
export const parseEpisode = (text: string, key: string, where: string): JournalEpisode => shaped(parseJson(text, key, where), isJournalEpisode, key, where, 'an episode needs status running (instance_id, initial_state_id) or finished (its episode_finished event)');
export const parseInflight = (text: string, key: string, where: string): InflightCall => shaped(parseJson(text, key, where), isInflightCall, key, where, 'a call in flight needs trace_id, action, params and available_actions');
export const parseStep = (text: string, key: string, where: string): SettledStepEvent => shaped(parseJson(text, key, where), isSettledStep, key, where, 'a step needs type trace_settled, traceId, instanceId, episode, step and seq');
const parseRewardRecord = (text: string, key: string, where: string): RewardLogRecord => shaped(parseJson(text, key, where), isRewardRecord, key, where, 'a reward record needs type, trace_id, episode, step and source');

/** An episode's field in a journal hash: its index. */
function episodeField(field: string, key: string): number {
  if (!/^\d+$/.test(field)) throw corrupt(key, `field '${field}'`, 'fields are episode indexes');
  return Number(field);
}

/** A JSON value read from Redis key `key`; STATE_CORRUPT naming the key when it is not JSON. */
export function parseJson(text: string, key: string, where = 'its value'): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw corrupt(key, where, `not JSON (${describeError(err)})`);
  }
}

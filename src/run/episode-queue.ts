/**
 * The queue of a distributed run's episodes: a Redis Stream read by the consumer group `workers`.
 * Why Streams and not BullMQ: a claim has to issue a fencing token atomically with taking the
 * entry, and every journal and state write of the episode has to check that token in the same
 * script as the write. With Streams, the claim, the renewal and the hand-back are each one Lua
 * script over the stream and the run's token hash; BullMQ keeps its own lock tokens inside its
 * scripts, where our writes cannot check them. Streams give the rest of what BullMQ would:
 * pending entries per consumer (XPENDING), stalled-entry recovery (XAUTOCLAIM past the lease),
 * and a depth that KEDA's Redis Streams scaler reads.
 *
 * A lease is the entry's idle time in the group: a worker renews by re-claiming its own entry
 * (XCLAIM … JUSTID resets the idle time) while its token is current; an entry idle past the lease
 * is taken by any other worker's XAUTOCLAIM, which bumps the token. One stream serves every run
 * (entries name their run), so workers and autoscalers watch one key.
 */
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import { raceAbort } from '../shared/abort.js';
import { describeError } from '../shared/errors.js';
import { distributedKeys } from './distributed-keys.js';
import { RUN_DEFAULTS } from '../shared/defaults.js';

/** The Redis queue a distributed run and its workers use unless told another (`--queue`). */
export const DEFAULT_QUEUE: string = RUN_DEFAULTS.queue;
const GROUP = 'workers';

/** An episode a worker holds: `token` fences its writes; `attempts` counts the claims so far (this one included). */
export interface Claim {
  readonly runId: string;
  readonly episode: number;
  readonly entryId: string;
  readonly token: number;
  readonly attempts: number;
  /** The worker that held it before, when it was taken over (its lease had lapsed). */
  readonly previousOwner?: string;
  /** `rollout`: an episode of a served run's rollouts request (rollout-jobs.ts), run whole and delivered back; else a distributed run's. */
  readonly kind?: 'rollout';
}

/** A worker as it last reported itself (every second while it lives). */
export interface WorkerHeartbeat {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly concurrency: number;
  readonly running: number;
  readonly finished: number;
  /** Writes of this worker refused by a fence (after it lost a lease). */
  readonly fenced: number;
  /** Runs whose episodes this worker refuses: its env is not the one they were started with (ENV_MISMATCH). */
  readonly mismatched?: readonly string[];
  readonly at: number;
}

// KEYS: fences, attempts, owners, marks, the episode's steps. ARGV: episode, consumer. Called once
// the entry is this consumer's: a new token (every earlier holder's writes are refused from now on),
// one more attempt. Attempts count claims since the episode last committed a step: an episode that
// progressed between two deaths of its workers is not the one killing them.
const CLAIM_SCRIPT = `
local token = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local done = redis.call('XLEN', KEYS[5])
if done > tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '-1') then
  redis.call('HSET', KEYS[4], ARGV[1], done)
  redis.call('HSET', KEYS[2], ARGV[1], 0)
end
local attempts = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
local previous = redis.call('HGET', KEYS[3], ARGV[1]) or ''
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return {token, attempts, previous}`;

// KEYS: queue, fences. ARGV: group, consumer, entry id, episode, token. Resets the entry's idle time
// while the token is current; 0 when the lease passed to another worker.
const RENEW_SCRIPT = `
if redis.call('HGET', KEYS[2], ARGV[4]) ~= ARGV[5] then return 0 end
local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
if #claimed == 0 then return 0 end
return 1`;

// KEYS: queue, fences, attempts. ARGV: group, entry id, episode, token, mode ('ack' | 'back'), run id, kind ('' or 'rollout').
// Done with the entry while the token is current. 'back' puts the episode at the end of the queue
// under a new token, and does not count the attempt (a graceful hand-back is not a failure).
const RELEASE_SCRIPT = `
if redis.call('HGET', KEYS[2], ARGV[3]) ~= ARGV[4] then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if ARGV[5] == 'back' then
  redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
  redis.call('HINCRBY', KEYS[3], ARGV[3], -1)
  if ARGV[7] == '' then redis.call('XADD', KEYS[1], '*', 'run', ARGV[6], 'episode', ARGV[3])
  else redis.call('XADD', KEYS[1], '*', 'run', ARGV[6], 'episode', ARGV[3], 'kind', ARGV[7]) end
end
return 1`;

// KEYS: queue, fences, results. ARGV: group, entry id, episode, token, payload. A rollout episode's
// result onto the serving run's results stream, in the same step as its entry leaves the queue,
// while the token is current: a worker that lost the lease (paused, cut off) cannot deliver, so each
// episode is delivered once whoever ran it.
const DELIVER_SCRIPT = `
if redis.call('HGET', KEYS[2], ARGV[3]) ~= ARGV[4] then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('XADD', KEYS[3], '*', 'episode', ARGV[3], 'token', ARGV[4], 'result', ARGV[5])
return 1`;

// KEYS: queue, fences. ARGV: entry id, episode. Takes an entry off the queue if no worker has
// claimed its episode yet (a claim sets its fence first); 0 once one has.
const WITHDRAW_SCRIPT = `
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], 0)
return 1`;

type Script = (...args: (string | number)[]) => Promise<unknown>;

/** A distributed run's queue in Redis: episodes claimed by workers under a lease, reclaimed when a worker stops renewing it. */
export class EpisodeQueue {
  readonly name: string;
  readonly #redis: Redis;
  readonly #workersKey: string;

  /** `name`: the stream (one per pool of workers; `agent:queue` by default). */
  constructor(redis: Redis, name = DEFAULT_QUEUE) {
    this.#redis = redis;
    this.name = name;
    this.#workersKey = `${name}:workers`;
    redis.defineCommand('agentQueueClaim', { numberOfKeys: 5, lua: CLAIM_SCRIPT });
    redis.defineCommand('agentQueueRenew', { numberOfKeys: 2, lua: RENEW_SCRIPT });
    redis.defineCommand('agentQueueRelease', { numberOfKeys: 3, lua: RELEASE_SCRIPT });
    redis.defineCommand('agentQueueDeliver', { numberOfKeys: 3, lua: DELIVER_SCRIPT });
    redis.defineCommand('agentQueueWithdraw', { numberOfKeys: 2, lua: WITHDRAW_SCRIPT });
  }

  #script(name: string): Script {
    const fn = (this.#redis as unknown as Record<string, Script>)[name] as Script;
    return (...args) => fn.call(this.#redis, ...args);
  }

  /** The stream and its group, if missing (every party calls this: whoever comes first creates them). */
  async ensure(signal?: AbortSignal): Promise<void> {
    try {
      await raceAbort(this.#redis.xgroup('CREATE', this.name, GROUP, '0', 'MKSTREAM'), signal);
    } catch (err) {
      if (!describeError(err).includes('BUSYGROUP')) throw err;
    }
  }

  /** Put a run's episodes on the queue (a new run's: a resumed coordinator finds them there already). */
  async enqueue(runId: string, episodes: readonly number[], signal?: AbortSignal): Promise<void> {
    await this.ensure(signal);
    for (let i = 0; i < episodes.length; i += 500) {
      const batch = this.#redis.pipeline();
      for (const episode of episodes.slice(i, i + 500)) batch.xadd(this.name, '*', 'run', runId, 'episode', String(episode));
      await raceAbort(batch.exec(), signal);
    }
  }

  /** One rollout episode of a served run onto the queue: its entry id (to withdraw it while no worker has it). */
  async addRollout(runId: string, episode: number, signal?: AbortSignal): Promise<string> {
    return (await raceAbort(this.#redis.xadd(this.name, '*', 'run', runId, 'episode', String(episode), 'kind', 'rollout'), signal)) as string;
  }

  /** Takes a rollout episode off the queue if no worker has claimed it yet: true when it was (nothing will run it). */
  async withdraw(runId: string, episode: number, entryId: string): Promise<boolean> {
    return (await this.#script('agentQueueWithdraw')(this.name, distributedKeys(runId).fences, entryId, episode)) === 1;
  }

  /**
   * Up to `count` episodes for `consumer`: first entries whose holder stopped renewing for
   * `leaseMs` (a dead or paused worker's), then new ones, waiting up to `blockMs` for one.
   * `redis` is the connection to block on (a blocking read holds its connection).
   */
  async claim(consumer: string, options: { readonly count: number; readonly leaseMs: number; readonly blockMs: number; readonly blocking: Redis; readonly signal?: AbortSignal }): Promise<Claim[]> {
    const { count, leaseMs, blockMs, blocking, signal } = options;
    const entries: [string, string[]][] = [];
    const [, stale] = (await raceAbort(this.#redis.xautoclaim(this.name, GROUP, consumer, leaseMs, '0-0', 'COUNT', count), signal)) as [string, [string, string[]][]];
    entries.push(...stale.filter((e) => e[1] !== null));
    if (entries.length < count) {
      // With stale entries in hand, new ones are only looked for, not waited for: their idle time
      // runs from the take-over, and a wait as long as the lease would have them taken again.
      const more = count - entries.length;
      const read = entries.length > 0 ? blocking.xreadgroup('GROUP', GROUP, consumer, 'COUNT', more, 'STREAMS', this.name, '>') : blocking.xreadgroup('GROUP', GROUP, consumer, 'COUNT', more, 'BLOCK', blockMs, 'STREAMS', this.name, '>');
      const fresh = (await raceAbort(read, signal)) as [string, [string, string[]][]][] | null;
      for (const [, list] of fresh ?? []) entries.push(...list);
    }
    const claims: Claim[] = [];
    for (const [entryId, fields] of entries) {
      const runId = field(fields, 'run');
      const episode = Number(field(fields, 'episode'));
      if (runId === undefined || !Number.isInteger(episode)) {
        // Not ours (something else wrote to the stream): acknowledge it away rather than choke on it.
        await this.#redis.xack(this.name, GROUP, entryId);
        continue;
      }
      const k = distributedKeys(runId);
      const [token, attempts, previous] = (await this.#script('agentQueueClaim')(k.fences, k.attempts, k.owners, k.marks, k.steps(episode), episode, consumer)) as [number, number, string];
      claims.push({ runId, episode, entryId, token, attempts, ...(previous !== '' && previous !== consumer ? { previousOwner: previous } : {}), ...(field(fields, 'kind') === 'rollout' ? { kind: 'rollout' as const } : {}) });
    }
    return claims;
  }

  /** Keep the lease; false when it passed to another worker (stop working on the episode). */
  async renew(consumer: string, claim: Claim): Promise<boolean> {
    return (await this.#script('agentQueueRenew')(this.name, distributedKeys(claim.runId).fences, GROUP, consumer, claim.entryId, claim.episode, claim.token)) === 1;
  }

  /** The episode is done (finished, or failed for good): off the queue. False when the lease was lost first. */
  async ack(claim: Claim): Promise<boolean> {
    return this.#release(claim, 'ack');
  }

  /** A rollout episode's result onto `results`, and the entry off the queue; false (nothing written) when the lease was lost first. */
  async deliver(claim: Claim, results: string, payload: string): Promise<boolean> {
    return (await this.#script('agentQueueDeliver')(this.name, distributedKeys(claim.runId).fences, results, GROUP, claim.entryId, claim.episode, claim.token, payload)) === 1;
  }

  /** Give the episode back (a worker shutting down): another worker continues it at once. */
  async handBack(claim: Claim): Promise<boolean> {
    return this.#release(claim, 'back');
  }

  async #release(claim: Claim, mode: 'ack' | 'back'): Promise<boolean> {
    const k = distributedKeys(claim.runId);
    return (await this.#script('agentQueueRelease')(this.name, k.fences, k.attempts, GROUP, claim.entryId, claim.episode, claim.token, mode, claim.runId, claim.kind ?? '')) === 1;
  }

  async heartbeat(beat: WorkerHeartbeat): Promise<void> {
    await this.#redis.hset(this.#workersKey, beat.id, JSON.stringify(beat));
  }

  async leave(workerId: string): Promise<void> {
    await this.#redis.hdel(this.#workersKey, workerId);
  }

  /**
   * Workers that reported within `staleMs`. A worker whose heartbeat lapsed (killed without
   * leaving) is pruned: its report leaves the registry, and its consumer leaves the stream's group
   * once it holds no entry (a dead worker's entries go to live workers when its lease lapses; a
   * consumer deleted with entries would drop them). Neither grows with every pod that ever ran.
   */
  async workers(now: number, staleMs: number, signal?: AbortSignal): Promise<WorkerHeartbeat[]> {
    const all = await raceAbort(this.#redis.hgetall(this.#workersKey), signal);
    const alive: WorkerHeartbeat[] = [];
    const gone: string[] = [];
    for (const [id, json] of Object.entries(all)) {
      const beat = parseBeat(json);
      if (beat && now - beat.at <= staleMs) alive.push(beat);
      else gone.push(id);
    }
    if (gone.length > 0) await this.#redis.hdel(this.#workersKey, ...gone);
    await this.#pruneConsumers(new Set(alive.map((w) => w.id)), staleMs, signal);
    return alive.sort((a, b) => a.id.localeCompare(b.id));
  }

  async #pruneConsumers(alive: ReadonlySet<string>, staleMs: number, signal?: AbortSignal): Promise<void> {
    let consumers: unknown[];
    try {
      consumers = (await raceAbort(this.#redis.xinfo('CONSUMERS', this.name, GROUP), signal)) as unknown[];
    } catch {
      return; // no stream or group yet
    }
    for (const raw of consumers) {
      const info = Object.fromEntries(chunkPairs(raw as unknown[]));
      const name = String(info['name']);
      if (alive.has(name) || Number(info['pending']) > 0 || Number(info['idle']) < staleMs) continue;
      await raceAbort(this.#redis.xgroup('DELCONSUMER', this.name, GROUP, name), signal);
    }
  }

  /** Forget a run: its tokens, attempts, marks and owners (the coordinator, once the run completed). */
  async retire(runId: string): Promise<void> {
    const k = distributedKeys(runId);
    await this.#redis.del(k.fences, k.attempts, k.marks, k.owners);
  }
}

/** `host:pid:random`: unique per process, readable in `XINFO CONSUMERS` and the live view. */
export function workerId(): string {
  return `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 6)}`;
}

function field(fields: readonly string[], name: string): string | undefined {
  const at = fields.indexOf(name);
  return at >= 0 && at % 2 === 0 ? fields[at + 1] : undefined;
}

/** `[k1, v1, k2, v2, …]` (a Redis reply) as pairs. */
function chunkPairs(flat: readonly unknown[]): [string, unknown][] {
  const out: [string, unknown][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([String(flat[i]), flat[i + 1]]);
  return out;
}

function parseBeat(json: string): WorkerHeartbeat | undefined {
  try {
    const beat = JSON.parse(json) as WorkerHeartbeat;
    return typeof beat.at === 'number' && typeof beat.id === 'string' ? beat : undefined;
  } catch {
    return undefined;
  }
}

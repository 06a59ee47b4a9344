/**
 * A distributed run's journal as its workers write it. Many processes write one run, each only the
 * episodes it holds a lease on; every write is a Lua script that first checks the episode's
 * fencing token (issued by the queue's claim), so a worker that lost its lease (paused past it, cut
 * off from Redis) can never write again: its writes are refused and counted in the run's `fenced`.
 *
 * Per episode, beside the run's `episodes` and `inflight` hashes (the same as a local durable
 * run's): `steps:<episode>`, its committed steps with stream ids numbered by step, so a step is
 * written once (a resend is recognised) and never skipped (a gap is Redis losing writes). Every
 * committed record also goes, in the same script, onto the run's `events` stream: what the
 * coordinator shows live and writes to the run folder, exactly what was committed.
 */
import type { Redis } from 'ioredis';
import { raceAbort } from '../shared/abort.js';
import { AgentError, describeError } from '../shared/errors.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import { parseEpisode, parseInflight, parseJson as parse, parseRun, parseStep, type EpisodeFinishedEvent, type InflightCall, type JournalEpisode, type JournalRun } from './run-journal.js';
import { distributedKeys, type DistributedKeys } from './distributed-keys.js';

/** What a worker needs to continue an episode: its journal entry, the call in flight, its committed steps. */
export interface EpisodeProgress {
  readonly entry?: JournalEpisode;
  readonly inflight?: InflightCall;
  readonly steps: readonly SettledStepEvent[];
}

/** An entry of the run's `events` stream: an event, the episode record with an episode_finished. */
export interface PublishedEvent {
  readonly id: string;
  readonly event: RunEvent;
  /** The event as the stream holds it: the JSON the run folder takes. */
  readonly json: string;
  readonly record?: EpisodeRecord;
  /** `<writer>/<episode>/<n>`: an entry not above the last seen of its writer and episode is a resend. */
  readonly uid: string;
}

// Every script starts here. KEYS: fences, meta, events, then its own. ARGV: episode, token, k, then
// k (event JSON, uid) pairs (the episode's events queued since its last write, so they reach the
// stream in order, ahead of this write, in the same round trip), then its own arguments from ARGV[o + 1].
const PREAMBLE = `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  redis.call('HINCRBY', KEYS[2], 'fenced', 1)
  return redis.error_reply('FENCED')
end
local o = 3 + 2 * tonumber(ARGV[3])
for i = 4, o, 2 do redis.call('XADD', KEYS[3], '*', 'e', ARGV[i], 'u', ARGV[i + 1]) end`;

// KEYS[4]: steps, KEYS[5]: inflight. Own ARGV: step n, event JSON, uid.
const STEP_SCRIPT = `${PREAMBLE}
local n = tonumber(ARGV[o + 1])
local last = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)
local lastN = 0
if last[1] then lastN = tonumber(string.match(last[1][1], '^(%d+)')) end
if lastN >= n then
  if redis.call('XRANGE', KEYS[4], n .. '-0', n .. '-0')[1] then return 0 end
  return redis.error_reply('GAP ' .. lastN)
end
if lastN ~= n - 1 then return redis.error_reply('GAP ' .. lastN) end
redis.call('XADD', KEYS[4], n .. '-0', 'd', ARGV[o + 2])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('XADD', KEYS[3], '*', 'e', ARGV[o + 2], 'u', ARGV[o + 3])
return n`;

// KEYS[4]: a hash. Own ARGV: the episode's value.
const SET_SCRIPT = `${PREAMBLE}
redis.call('HSET', KEYS[4], ARGV[1], ARGV[o + 1])
return 1`;

// Only the queued events.
const PUBLISH_SCRIPT = `${PREAMBLE}
return 1`;

// KEYS[4]: episodes, KEYS[5]: inflight. Own ARGV: entry JSON, event JSON, record JSON or '', uid.
const FINISH_SCRIPT = `${PREAMBLE}
redis.call('HSET', KEYS[4], ARGV[1], ARGV[o + 1])
redis.call('HDEL', KEYS[5], ARGV[1])
if ARGV[o + 3] ~= '' then
  redis.call('XADD', KEYS[3], '*', 'e', ARGV[o + 2], 'r', ARGV[o + 3], 'u', ARGV[o + 4])
else
  redis.call('XADD', KEYS[3], '*', 'e', ARGV[o + 2], 'u', ARGV[o + 4])
end
return 1`;

type Script = (...args: (string | number)[]) => Promise<unknown>;


export class FencedJournal {
  readonly runId: string;
  readonly #redis: Redis;
  readonly #keys: DistributedKeys;
  readonly #tokens = new Map<number, number>();
  readonly #uidPrefix: string;
  #uids = 0;
  /** Per episode, events not yet sent: (JSON, uid) pairs, flushed with its next write or at the end of the tick. */
  readonly #queued = new Map<number, string[]>();
  #flush: NodeJS.Immediate | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #failure: AgentError | undefined;
  /** Told of the first write that fails for a reason other than a lost lease (the worker drops the run). */
  onFailure: (err: AgentError) => void = () => undefined;
  /** Told when a write of `episode` was refused: this worker lost its lease on it. */
  onLeaseLost: (episode: number) => void = () => undefined;

  constructor(redis: Redis, runId: string, writerId: string) {
    this.#redis = redis;
    this.runId = runId;
    this.#keys = distributedKeys(runId);
    this.#uidPrefix = `${writerId}/`;
    redis.defineCommand('agentFencedStep', { numberOfKeys: 5, lua: STEP_SCRIPT });
    redis.defineCommand('agentFencedSet', { numberOfKeys: 4, lua: SET_SCRIPT });
    redis.defineCommand('agentFencedPublish', { numberOfKeys: 3, lua: PUBLISH_SCRIPT });
    redis.defineCommand('agentFencedFinish', { numberOfKeys: 5, lua: FINISH_SCRIPT });
  }

  get failure(): AgentError | undefined {
    return this.#failure;
  }

  /** The run as its coordinator recorded it, or undefined when Redis has no such run (it completed, or never was). */
  async run(signal?: AbortSignal): Promise<JournalRun | undefined> {
    const json = await raceAbort(this.#redis.hget(this.#keys.meta, 'run'), signal);
    return json === null ? undefined : parseRun(json, this.#keys.meta);
  }

  /** This worker holds `episode` under `token` (from its claim) until `release`. */
  hold(episode: number, token: number): void {
    this.#tokens.set(episode, token);
  }

  /** The episode is no longer this worker's: what it queued goes out first, under its token. */
  release(episode: number): void {
    if (this.#queued.has(episode)) this.#write(episode, 'agentFencedPublish', [], []).catch(() => undefined);
    this.#tokens.delete(episode);
  }

  token(episode: number): number | undefined {
    return this.#tokens.get(episode);
  }

  async progress(episode: number, signal?: AbortSignal): Promise<EpisodeProgress> {
    const k = this.#keys;
    const [entry, inflight, steps] = await raceAbort(Promise.all([this.#redis.hget(k.episodes, String(episode)), this.#redis.hget(k.inflight, String(episode)), this.#redis.xrange(k.steps(episode), '-', '+')]), signal);
    return {
      ...(entry !== null ? { entry: parseEpisode(entry, k.episodes, String(episode)) } : {}),
      ...(inflight !== null ? { inflight: parseInflight(inflight, k.inflight, String(episode)) } : {}),
      steps: steps.map(([id, fields]) => parseStep(fields[1] ?? '', k.steps(episode), id)),
    };
  }

  async episodeStarted(episode: number, entry: Extract<JournalEpisode, { status: 'running' }>, signal?: AbortSignal): Promise<void> {
    await raceAbort(this.#write(episode, 'agentFencedSet', [this.#keys.episodes], [JSON.stringify(entry)]), signal);
  }

  async dispatching(episode: number, call: InflightCall, signal?: AbortSignal): Promise<void> {
    await raceAbort(this.#write(episode, 'agentFencedSet', [this.#keys.inflight], [JSON.stringify(call)]), signal);
  }

  step(event: SettledStepEvent): Promise<void> {
    return this.#write(event.episode, 'agentFencedStep', [this.#keys.steps(event.episode), this.#keys.inflight], [event.step, JSON.stringify(event), this.#uid(event.episode)]);
  }

  /**
   * An event of the episode onto the run's stream: queued, and sent with the episode's next write
   * or at the end of this tick (one round trip for the burst of events a step settles with).
   */
  publish(episode: number, event: RunEvent): void {
    let queue = this.#queued.get(episode);
    if (!queue) this.#queued.set(episode, (queue = []));
    queue.push(JSON.stringify(event), this.#uid(episode));
    if (this.#flush) return;
    this.#flush = setImmediate(() => {
      this.#flush = undefined;
      for (const queued of [...this.#queued.keys()]) this.#write(queued, 'agentFencedPublish', [], []).catch(() => undefined);
    });
  }

  async episodeFinished(episode: number, record: EpisodeRecord | undefined, event: EpisodeFinishedEvent, signal?: AbortSignal): Promise<void> {
    const entry: JournalEpisode = { status: 'finished', ...(record ? { record } : {}), event };
    await raceAbort(this.#write(episode, 'agentFencedFinish', [this.#keys.episodes, this.#keys.inflight], [JSON.stringify(entry), JSON.stringify(event), record ? JSON.stringify(record) : '', this.#uid(episode)]), signal);
  }

  async flushed(): Promise<void> {
    await this.#tail.catch(() => undefined);
    if (this.#failure) throw this.#failure;
  }

  after(fn: () => void): void {
    void this.#tail.then(fn, fn);
  }

  /**
   * `<writer>/<episode>/<n>`, n increasing: one writer's writes of one episode reach the stream in
   * the order they were numbered (its queued events go ahead of its next write), so a reader drops
   * any entry not above the last it saw of that writer and episode: a resend.
   */
  #uid(episode: number): string {
    return `${this.#uidPrefix}${episode}/${++this.#uids}`;
  }

  #write(episode: number, script: string, keys: readonly string[], args: readonly (string | number)[]): Promise<void> {
    const token = this.#tokens.get(episode);
    const queued = this.#queued.get(episode) ?? [];
    this.#queued.delete(episode);
    if (token === undefined) return Promise.reject(leaseLost(this.runId, episode));
    const fn = (this.#redis as unknown as Record<string, Script>)[script] as Script;
    const done = fn.call(this.#redis, this.#keys.fences, this.#keys.meta, this.#keys.events, ...keys, episode, token, queued.length / 2, ...queued, ...args).then(
      () => undefined,
      (err: unknown) => {
        const message = describeError(err);
        if (message.includes('FENCED')) {
          this.onLeaseLost(episode);
          throw leaseLost(this.runId, episode);
        }
        const gap = /GAP (\d+)/.exec(message);
        const failure = gap
          ? new AgentError('STORE_WRITES_LOST', `Redis lost acknowledged writes of run ${this.runId}: episode ${episode}'s steps end at ${gap[1]}`, { hint: 'Redis restarted without its last writes on disk. The episode continues from what Redis kept once it is claimed again.' })
          : new AgentError('STORE_UNAVAILABLE', `writing run ${this.runId} to Redis failed: ${message}`, { cause: err, hint: 'Check Redis; the worker takes episodes again once it answers.' });
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
}

function leaseLost(runId: string, episode: number): AgentError {
  return new AgentError('LEASE_LOST', `this worker's lease on episode ${episode} of run ${runId} passed to another worker; its write was refused`, { hint: 'Another worker continues the episode from its last committed step; nothing to do.' });
}


/** Read the events stream after `from` (exclusive; '0' for all), up to `count`, waiting up to `blockMs` on `redis`. */
export async function readEvents(redis: Redis, runId: string, from: string, count: number, blockMs: number): Promise<PublishedEvent[]> {
  const key = distributedKeys(runId).events;
  const reply = (await redis.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', key, from)) as [string, [string, string[]][]][] | null;
  const out: PublishedEvent[] = [];
  for (const [, entries] of reply ?? []) {
    for (const [id, fields] of entries) {
      const get = (name: string): string | undefined => {
        const at = fields.indexOf(name);
        return at >= 0 ? fields[at + 1] : undefined;
      };
      const e = get('e');
      if (e === undefined) continue;
      const r = get('r');
      out.push({ id, event: parse(e, key, id) as RunEvent, json: e, ...(r !== undefined ? { record: parse(r, key, id) as EpisodeRecord } : {}), uid: get('u') ?? id });
    }
  }
  return out;
}

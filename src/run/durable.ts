/**
 * A durable run's Redis side: the state store and the journal on one connection (so their writes
 * reach Redis in one order), set up for a new run or read back for a resume; what the episode
 * runner is told to do for it (journal before acting, rewind on resume); and an episode's history
 * archived into the run folder once it has finished.
 */
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { RunEvent } from '../events/run-events.js';
import { raceAbort } from '../shared/abort.js';
import type { Clock } from '../shared/clock.js';
import { AgentError, UsageError } from '../shared/errors.js';
import { hashSeed } from '../shared/rng.js';
import { archiveToFolder, type FolderArchiver } from '../state/archive.js';
import { openRedis, redactUrl, RedisStateStore } from '../state/redis-store.js';
import type { EpisodeHooks } from './episode-runner.js';
import type { EpisodeQueue } from './episode-queue.js';
import type { FencedJournal } from './fenced-journal.js';
import { RunJournal, type JournalContents, type JournalRun } from './run-journal.js';
import { RUN_DEFAULTS } from '../shared/defaults.js';

/** How long a durable run waits for an unreachable Redis before it stops, by default. */
export const DEFAULT_STORE_WAIT_MS = RUN_DEFAULTS.storeWaitMs;

/** A durable run's Redis side: one connection for the state store and the journal, so their writes reach Redis in one order. */
export interface Durable<J extends RunJournal | FencedJournal = RunJournal> {
  readonly url: string;
  readonly redis: Redis;
  readonly store: RedisStateStore;
  /** A worker of a distributed run writes through the fenced journal; every other durable run through its own. */
  readonly journal: J;
  /** What the journal held when this process resumed the run. */
  readonly resumed?: JournalContents;
  /** A distributed run's queue (the coordinator's). */
  readonly queue?: EpisodeQueue;
  /** Where the run folder's history goes (trimmed deltas, and each finished episode's): one per run, so its folder is made and each file read once. */
  readonly archive?: FolderArchiver;
}

/** A new run's id: its start (UTC, to the second) and six hex digits of the time, seed and pid. */
export function runIdFor(time: number, seed: number): string {
  const stamp = new Date(time).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${stamp}-${hashSeed(time, seed, process.pid).toString(16).padStart(8, '0').slice(0, 6)}`;
}

/** A Redis URL (`redis://` or `rediss://`), as `--store` takes one. */
export function isRedisUrl(spec: unknown): spec is string {
  return typeof spec === 'string' && /^rediss?:\/\//.test(spec);
}

function durableOn(url: string, redis: Redis, runId: string, out: string, resumed?: JournalContents): Durable {
  // Keys of the run's episodes under agent:<run-id>:; history trimmed from Redis goes to the run folder.
  const archive = archiveToFolder(path.join(out, runId, 'history'));
  const store = new RedisStateStore(redis, { prefix: `agent:${runId}:`, snapshotEvery: 50, retainDeltas: 1_000, archive }, true);
  return { url, redis, store, journal: new RunJournal(redis, runId), archive, ...(resumed ? { resumed } : {}) };
}

/** A new durable run's Redis side, when the store is a Redis URL (its journal is written when the run starts). */
export async function newJournal(spec: unknown, clock: Clock, seed: number, out: string, signal: AbortSignal | undefined): Promise<Durable | undefined> {
  if (!isRedisUrl(spec)) return undefined;
  const redis = await openRedis(spec, signal);
  // A durable run waits out a Redis outage (see watchStore) instead of failing its commands.
  redis.options.maxRetriesPerRequest = null;
  const runId = runIdFor(clock.now(), seed);
  return durableOn(spec, redis, runId, out);
}

/** The Redis of a run to resume, connected; the run id and the store checked first. */
async function openForResume(runId: string, spec: unknown, signal: AbortSignal | undefined): Promise<{ url: string; redis: Redis }> {
  if (!isRedisUrl(spec)) throw new UsageError('resuming a run needs the Redis store it ran on', 'Pass --store redis://host:port/db (or set AGENT_STORE) as when the run started.');
  if (!/^[\w.-]+$/.test(runId)) throw new UsageError(`'${runId}' is not a run id`, 'Pass the name of the run folder (runs/<run-id>).');
  const redis = await openRedis(spec, signal);
  redis.options.maxRetriesPerRequest = null;
  return { url: spec, redis };
}

function noSuchRun(runId: string, url: string): UsageError {
  return new UsageError(`Redis at ${redactUrl(url)} has no run '${runId}'`, 'Check the run id (the name of its folder under runs/) and that --store names the Redis the run used. A run that completed is gone from Redis: its folder has summary.json.');
}

/** What a run to resume was started with (its env, settings, served suite), read without taking the run. */
export async function readJournalRun(runId: string, spec: unknown, signal: AbortSignal | undefined): Promise<JournalRun> {
  const { url, redis } = await openForResume(runId, spec, signal);
  try {
    const run = await new RunJournal(redis, runId).readRun(signal);
    if (!run) throw noSuchRun(runId, url);
    return run;
  } finally {
    redis.disconnect();
  }
}

/** The Redis side of a run to resume: its journal read back, and the run taken (refused while another process holds it). */
export async function resumeJournal(runId: string, spec: unknown, signal: AbortSignal | undefined): Promise<Durable> {
  const { url, redis } = await openForResume(runId, spec, signal);
  try {
    const journal = new RunJournal(redis, runId);
    const resumed = await journal.read(signal);
    if (!resumed) throw noSuchRun(runId, url);
    await journal.acquire(signal);
    return { ...durableOn(url, redis, runId, resumed.run.out, resumed), journal };
  } catch (err) {
    redis.disconnect();
    throw err;
  }
}

export async function closeDurable(durable: Durable<RunJournal | FencedJournal> | undefined): Promise<void> {
  if (!durable) return;
  if (durable.journal instanceof RunJournal) durable.journal[Symbol.dispose]();
  await durable.store[Symbol.asyncDispose]();
}

/**
 * Copy an instance's history into the run folder (what trimming or an earlier try, cut short by a
 * crash, has not archived already), then remove its keys from Redis.
 */
export async function archiveAndDrop({ store, archive }: Pick<Durable, 'store' | 'archive'>, instanceId: string, dir: string): Promise<void> {
  const bounds = await store.bounds(instanceId);
  if (!bounds) return;
  const archiver = archive ?? archiveToFolder(dir);
  const from = Math.max(bounds.oldestSeq, await archiver.lastSeq(instanceId)) + 1;
  if (from <= bounds.headSeq) await archiver(instanceId, await store.read(instanceId, from, bounds.headSeq));
  await store.drop(instanceId);
}

/** A durable run journals each episode's start and each call before it is dispatched, and rewinds its Redis history on resume. */
export function durableHooks({ journal, store }: Durable<RunJournal | FencedJournal>): Pick<EpisodeHooks, 'starting' | 'dispatching' | 'rewind' | 'committed'> {
  return {
    starting: (i, entry, signal) => journal.episodeStarted(i, entry, signal),
    dispatching: (i, call, signal) => journal.dispatching(i, call, signal),
    rewind: async (instanceId, seq, signal) => void (await store.rewind(instanceId, seq, signal)),
    // A step's journal write was issued as it settled: once every write so far is answered, it is in Redis.
    committed: (signal) => raceAbort(journal.flushed(), signal),
  };
}

export interface StoreWatch {
  readonly clock: Clock;
  /** How long Redis may stay away before the run stops (resumable). */
  readonly waitMs: number;
  readonly emit: (event: RunEvent) => void;
  /** True once the run is stopping anyway (nothing to report then). */
  readonly stopping: () => boolean;
  readonly fail: (err: AgentError) => void;
  /** The command that continues the run (its hint once the run stops). */
  readonly resume: string;
}

/**
 * Redis going away pauses a durable run (commands wait while the client reconnects with backoff);
 * the live view says so (`store_unavailable`, `store_recovered`). Past the store wait, the run
 * stops cleanly (`STORE_UNAVAILABLE`) and can be resumed. Returns the unwatch.
 */
export function watchStore(durable: Durable<RunJournal | FencedJournal>, o: StoreWatch): () => void {
  const store = redactUrl(durable.url);
  let since: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  const onClose = (): void => {
    if (since !== undefined || o.stopping()) return;
    since = o.clock.now();
    o.emit({ type: 'store_unavailable', time: since, store, since });
    timer = setTimeout(() => {
      const wait = o.waitMs;
      o.fail(new AgentError('STORE_UNAVAILABLE', `Redis at ${store} was unreachable for ${wait < 1000 ? `${wait} ms` : `${Math.round(wait / 1000)} s`}`, { hint: `Check Redis, then continue with: ${o.resume}` }));
    }, o.waitMs);
  };
  const onReady = (): void => {
    if (since === undefined) return;
    clearTimeout(timer);
    o.emit({ type: 'store_recovered', time: o.clock.now(), store, down_ms: o.clock.now() - since });
    since = undefined;
  };
  durable.redis.on('close', onClose);
  durable.redis.on('ready', onReady);
  return () => {
    clearTimeout(timer);
    durable.redis.off('close', onClose);
    durable.redis.off('ready', onReady);
  };
}

/**
 * Stop a durable run on a store failure: with no retry left, ioredis's next reconnect attempt
 * ends the connection and fails the commands waiting in its queue (disconnect() while
 * reconnecting would leave them waiting).
 */
export function stopRetrying(durable: Durable<RunJournal | FencedJournal> | undefined, err: AgentError): void {
  if (err.code === 'STORE_UNAVAILABLE' && durable) durable.redis.options.retryStrategy = () => null;
}

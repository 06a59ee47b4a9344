/**
 * A distributed run, as its coordinator: the episodes go on the queue (a resumed coordinator finds
 * them queued), then the run's events stream is followed from its start — what workers committed
 * is shown and written into the run folder — until every episode has finished. Which workers are
 * alive is checked every second; when every live worker refuses the run (another env), it says so.
 * The episodes themselves run in `agent worker` processes (rollout-worker.ts).
 */
import type { Redis } from 'ioredis';
import type { WorkerRow } from '../events/run-events.js';
import { raceAbort, sleep } from '../shared/abort.js';
import type { Clock } from '../shared/clock.js';
import { distributedKeys } from './distributed-keys.js';
import { archiveAndDrop, type Durable } from './durable.js';
import type { EpisodeQueue, WorkerHeartbeat } from './episode-queue.js';
import { readEvents } from './fenced-journal.js';
import type { RunSummary } from './run-summary.js';
import type { EpisodeLauncher, Scheduler } from './scheduler.js';

/** How long a worker may go without reporting before a coordinator counts it dead (workers report every second). */
const WORKER_STALE_MS = 5_000;

/**
 * The least time between two reads of the events stream, unless the last read came back full. A
 * blocking read returns with whatever one step settled, so at a few hundred steps/s the
 * coordinator spent most of its CPU on round trips (1.2 ms per step); gathering 25 ms of events
 * per read costs the live view at most that much delay.
 */
const READ_EVERY_MS = 25;
const READ_COUNT = 1_000;

export interface DistributedRun {
  readonly runId: string;
  readonly episodes: number;
  /** The env the run was started with: its name, folder and fingerprint (what workers must have). */
  readonly env: { readonly name: string; readonly dir: string; readonly fingerprint: string | undefined };
  readonly clock: Clock;
  readonly durable: Durable;
  readonly queue: EpisodeQueue;
  /** Where finished episodes' histories are archived. */
  readonly historyDir: string;
}

/** The coordinator's scheduler: episodes run on workers, and their events come back through Redis. */
export class DistributedScheduler implements Scheduler {
  readonly resumeCommand = 'agent run';
  readonly continuesEpisodes = true;
  readonly stopIsEnd = false;
  readonly remote = true;

  constructor(readonly run: DistributedRun) {}

  drive(launcher: EpisodeLauncher, signal: AbortSignal): Promise<void> {
    return coordinate(this.run, launcher, signal);
  }
}

async function coordinate(ctx: DistributedRun, launcher: EpisodeLauncher, signal: AbortSignal): Promise<void> {
  const { runId, durable, queue, clock } = ctx;
  if (!durable.resumed) await queue.enqueue(runId, Array.from({ length: ctx.episodes }, (_, i) => i), signal);
  else await queue.ensure(signal);
  const reader = durable.redis.duplicate();
  reader.on('error', () => undefined);
  const finished = new Set<number>();
  /** The newest write seen per writer and episode: a write resent after a lost reply is in the stream twice. */
  const newest = new Map<string, number>();
  let alive: string | undefined;
  let refusedByAll = false;
  const checkWorkers = async (): Promise<void> => {
    const workers = await queue.workers(clock.now(), WORKER_STALE_MS, signal).catch(() => undefined);
    if (!workers) return;
    // Workers are alive, but each has another version of the env: say so, the run would wait forever.
    const refusing = workers.length > 0 && workers.every((w) => w.mismatched?.includes(runId));
    if (refusing && !refusedByAll) {
      launcher.committed({ type: 'notice', time: clock.now(), code: 'ENV_MISMATCH', message: `no worker has env ${ctx.env.fingerprint ?? '?'} ('${ctx.env.name}'): ${workers.length} live worker(s) refuse the run's episodes with another version. Deploy the env the run was started with (${ctx.env.dir}) and restart them.` });
    }
    refusedByAll = refusing;
    const key = workers.map((w) => `${w.id}/${w.running}`).join(',');
    if (key === alive) return;
    alive = key;
    launcher.committed({ type: 'workers', time: clock.now(), queue: queue.name, workers: workers.map(workerRow) });
  };
  await checkWorkers();
  const timer = setInterval(() => void checkWorkers(), 1_000);
  let from = '0';
  let readAt = -Infinity;
  let full = false;
  try {
    while (!signal.aborted && finished.size < ctx.episodes) {
      const wait = readAt + READ_EVERY_MS - performance.now();
      if (!full && wait > 0) await sleep(wait, signal).catch(() => undefined);
      readAt = performance.now();
      // While Redis is away the read fails: try again (the store watch stops the run past its store wait).
      const batch = await raceAbort(readEvents(reader, runId, from, READ_COUNT, 1_000), signal).catch(async () => {
        await sleep(250, signal).catch(() => undefined);
        return [];
      });
      full = batch.length === READ_COUNT;
      for (const p of batch) {
        from = p.id;
        const cut = p.uid.lastIndexOf('/');
        const source = p.uid.slice(0, cut);
        const n = Number(p.uid.slice(cut + 1));
        if (n <= (newest.get(source) ?? 0)) continue;
        newest.set(source, n);
        // Its JSON as the worker serialized it goes into the folder as it is.
        launcher.committed(p.event, { json: p.json });
        if (p.event.type !== 'episode_finished') continue;
        launcher.ended(p.event, p.record);
        await archiveAndDrop(durable, p.event.instance_id, ctx.historyDir);
        finished.add(p.event.episode);
      }
      await launcher.breathe();
    }
  } finally {
    clearInterval(timer);
    reader.disconnect();
  }
}

/** A distributed run's summary names its workers and the writes their fences refused. */
export async function withWorkers(durable: Durable | undefined, workersSeen: Iterable<string>, summary: RunSummary): Promise<RunSummary> {
  if (!durable?.queue) return summary;
  const fenced = Number((await durable.redis.hget(distributedKeys(summary.run_id).meta, 'fenced').catch(() => null)) ?? 0);
  return { ...summary, distributed: { queue: durable.queue.name, workers: [...workersSeen].sort(), fenced_writes: fenced } };
}

/** A completed distributed run's keys beside its journal: the events stream, per-episode steps, the queue's tokens. */
export async function retireDistributed(redis: Redis, queue: EpisodeQueue, runId: string, episodes: number): Promise<void> {
  const keys = distributedKeys(runId);
  for (let i = 0; i < episodes; i += 500) await redis.del(...Array.from({ length: Math.min(500, episodes - i) }, (_, j) => keys.steps(i + j)));
  await redis.del(keys.events);
  await queue.retire(runId);
}

function workerRow(w: WorkerHeartbeat): WorkerRow {
  return { id: w.id, host: w.host, pid: w.pid, running: w.running, concurrency: w.concurrency };
}

/**
 * Fault drills of distributed runs: a coordinator (in this process, through the library) and
 * `agent worker` child processes on one Redis, with workers killed (SIGKILL), paused (SIGSTOP) or
 * Redis restarted while the run goes on. The run folder is then checked like a crashed durable
 * run's (scripts/crash-harness.ts `verify`): every episode finished once, every (episode, step)
 * once and in order, every history replaying to the final state, no keys left in Redis.
 * Used by src/run/distributed.integration.test.ts (reduced counts) and scripts/distributed-crash-test.ts (full).
 */
import { execa, type ResultPromise } from 'execa';
import { Redis } from 'ioredis';
import type { OtelConfig } from '../src/observe/otel-config.js';
import { Run } from '../src/run/run.js';
import type { RunSummary } from '../src/run/run-summary.js';
import { RolloutWorker, type WorkerSummary } from '../src/run/rollout-worker.js';
import { Rng } from '../src/shared/rng.js';

export interface WorkerProcess {
  readonly child: ResultPromise;
  readonly pid: number;
  /** Everything it printed so far. */
  output(): string;
}

export interface PoolOptions {
  readonly store: string;
  readonly queue: string;
  readonly concurrency?: number;
  readonly leaseMs?: number;
  readonly maxAttempts?: number;
  readonly extra?: readonly string[];
  /** Folders where the worker finds envs by name (`--envs`). */
  readonly envs?: readonly string[];
  /** The `agent` to run: the checkout's (sources through tsx, the default) or `dist/bin/agent.js` (the built package, as benchmarks measure). */
  readonly bin?: string;
}

/** One `agent worker` process; resolves once it has said it takes episodes. */
export async function startWorker(o: PoolOptions): Promise<WorkerProcess> {
  const child = execa('node', [o.bin ?? 'bin/agent.js', 'worker', '--store', o.store, '--queue', o.queue, '--concurrency', String(o.concurrency ?? 2), '--lease', `${o.leaseMs ?? 1000}ms`, '--max-attempts', String(o.maxAttempts ?? 3), ...(o.extra ?? [])], { reject: false, stdin: 'ignore', all: true });
  let text = '';
  await new Promise<void>((resolve, reject) => {
    child.all?.on('data', (c: Buffer) => {
      text += c.toString();
      if (text.includes('taking episodes from')) resolve();
    });
    void child.then((r) => reject(new Error(`the worker exited ${r.exitCode} before taking episodes: ${text.slice(-800)}`)));
  });
  return { child, pid: child.pid as number, output: () => text };
}

/** A worker in this process (where the test needs no signal or death of it): `stop` drains it and closes it. */
export async function inProcessWorker(o: PoolOptions): Promise<{ readonly worker: RolloutWorker; stop(): Promise<WorkerSummary> }> {
  const worker = await RolloutWorker.start({ store: o.store, queue: o.queue, concurrency: o.concurrency ?? 2, leaseMs: o.leaseMs ?? 1000, maxAttempts: o.maxAttempts ?? 3, ...(o.envs ? { envs: o.envs } : {}) });
  const controller = new AbortController();
  const working = worker.work(controller.signal);
  return {
    worker,
    async stop() {
      controller.abort();
      const summary = await working;
      await worker[Symbol.asyncDispose]();
      return summary;
    },
  };
}

/** Start a distributed run as its coordinator (in this process); `execute` is under way when this returns. */
export async function coordinate(options: { readonly env: string; readonly store: string; readonly queue: string; readonly out: string; readonly episodes: number; readonly maxSteps: number; readonly toolOptions?: Record<string, string | number>; readonly otel?: OtelConfig; readonly signal?: AbortSignal }): Promise<{ readonly run: Run; readonly done: Promise<RunSummary> }> {
  const run = await Run.prepare({ env: options.env, store: options.store, distributed: true, queue: options.queue, out: options.out, episodes: options.episodes, maxSteps: options.maxSteps, policy: 'random', ...(options.toolOptions ? { toolOptions: options.toolOptions } : {}), ...(options.otel ? { otel: options.otel } : {}) });
  return { run, done: run.execute(options.signal) };
}

export interface KillDrill {
  readonly kills: number;
  readonly workers: readonly WorkerProcess[];
}

/**
 * Kill a random worker with SIGKILL every `[min, max]` ms and start a replacement, `kills` times
 * or until `done` settles; then stop every worker with SIGTERM.
 */
export async function killWorkers(pool: PoolOptions, size: number, kills: number, everyMs: readonly [number, number], done: Promise<unknown>, seed = 1, log?: (line: string) => void): Promise<KillDrill> {
  const rng = new Rng(seed);
  // Replacements start in the background (a process takes a second or two to boot): the kills go
  // on meanwhile, among the workers that are up.
  const up: WorkerProcess[] = [];
  const all: Promise<WorkerProcess>[] = [];
  const start = (): void => {
    all.push(startWorker(pool).then((w) => (up.push(w), w)));
  };
  for (let i = 0; i < size; i++) start();
  let finished = false;
  void done.finally(() => (finished = true));
  let n = 0;
  while (n < kills && !finished) {
    await Promise.race([done.catch(() => undefined), new Promise((r) => setTimeout(r, rng.int(everyMs[0], everyMs[1])))]);
    // A victim mid-episode: one that has finished an episode already (so its env is loaded and it runs others).
    const busy = up.filter((w) => /^finished /m.test(w.output()));
    if (finished || busy.length === 0) continue;
    const victim = busy[rng.int(0, busy.length - 1)] as WorkerProcess;
    up.splice(up.indexOf(victim), 1);
    victim.child.kill('SIGKILL');
    await victim.child;
    n++;
    log?.(`kill ${n}/${kills}: worker pid ${victim.pid}`);
    start();
  }
  await done.catch(() => undefined);
  const workers = await Promise.all(all);
  await stopWorkers(workers);
  return { kills: n, workers };
}

export async function stopWorkers(workers: readonly WorkerProcess[]): Promise<void> {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGTERM');
  await Promise.all(workers.map((w) => w.child));
}

/** Keys left under a queue (its stream and workers hash), removed: tests leave Redis as they found it. */
export async function dropQueue(store: string, queue: string): Promise<void> {
  const redis = new Redis(store, { maxRetriesPerRequest: 1 });
  await redis.del(queue, `${queue}:workers`);
  await redis.quit();
}

/**
 * Distributed runs on this machine: throughput with 1, 2 and 4 `agent worker` processes (8
 * episodes in hand each) on a 20 ms tool, against the ideal (every slot busy: 50 steps/s per slot);
 * the coordinator's CPU per episode; and how long a killed worker's episode waits to be taken over
 * (target: lease + 1 s).
 */
import { Redis } from 'ioredis';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { coordinate, dropQueue, startWorker, stopWorkers } from '../scripts/distributed-harness.js';
import { target } from './lib/targets.js';
import type * as Package from '../src/index.js';

// Workers and coordinator run the built package, as users install it (`npm run bench` builds
// first): the sources through tsx cost 1.5× the CPU and a transpile of every module on start.
const built = path.join(import.meta.dirname, '..', 'dist');
if (!existsSync(path.join(built, 'bin', 'agent.js'))) throw new Error('dist/ is missing: run `npm run build` first');
const { Run } = (await import(path.join(built, 'src', 'index.js'))) as typeof Package;
const bin = path.join(built, 'bin', 'agent.js');

const store = process.env['AGENT_STORE'] ?? 'redis://127.0.0.1:6379/0';
const out = await mkdtemp(path.join(os.tmpdir(), 'agent-bench-distributed-'));
const redis = new Redis(store);
const CONCURRENCY = 8;
const STEP_MS = 20;

/** CPU time (user + system) a live process has used, from /proc (Linux). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

try {
  for (const n of [1, 2, 4]) {
    const queue = `agent-bench:${process.pid}:${n}:queue`;
    const workers = await Promise.all(Array.from({ length: n }, () => startWorker({ store, queue, concurrency: CONCURRENCY, leaseMs: 10_000, bin })));
    const episodes = 48 * n;
    // Booting the processes is not the run's cost; joining it (loading the env) is.
    const booted = workers.reduce((sum, w) => sum + cpuMs(w.pid), 0);
    const t0 = performance.now();
    const run = await Run.prepare({ env: 'fixtures/distributed', store, distributed: true, queue, out, episodes, maxSteps: 10, policy: 'random', toolOptions: { step_ms: STEP_MS } });
    // The coordinator's CPU between the 25th and the 75th percent of the steps: what a step costs it
    // once the run is going, without its start (env, folder, first compilations) and end (summary).
    const marks: NodeJS.CpuUsage[] = [];
    let settled = 0;
    const stop = run.events.onAny((e) => {
      if (e.type !== 'trace_settled') return;
      settled++;
      if (settled === Math.round(episodes * 10 * 0.25) || settled === Math.round(episodes * 10 * 0.75)) marks.push(process.cpuUsage());
    });
    const cpu = process.cpuUsage();
    const summary = await run.execute();
    stop();
    const [m25, m75] = marks as [NodeJS.CpuUsage, NodeJS.CpuUsage];
    const steadyCpuMs = (m75.user - m25.user + m75.system - m25.system) / 1000 / (Math.round(episodes * 10 * 0.75) - Math.round(episodes * 10 * 0.25));
    const seconds = (performance.now() - t0) / 1000;
    const used = process.cpuUsage(cpu);
    const workerCpuMs = workers.reduce((sum, w) => sum + cpuMs(w.pid), 0) - booted;
    await stopWorkers(workers);
    await dropQueue(store, queue);
    // Steady state: from the first dispatch to the last settled step (without each worker's first join of the run).
    const events = (await readFile(path.join(out, run.runId, 'events.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; time: number });
    const first = events.find((e) => e.type === 'dispatched')?.time ?? 0;
    const last = events.filter((e) => e.type === 'trace_settled').at(-1)?.time ?? 0;
    const steady = summary.steps.total / ((last - first) / 1000);
    const ideal = (n * CONCURRENCY * 1000) / STEP_MS;
    console.log(
      `${n} worker(s) × ${CONCURRENCY}: ${summary.steps.total} steps in ${seconds.toFixed(2)} s = ${(summary.steps.total / seconds).toFixed(0)} steps/s; steady ${steady.toFixed(0)} steps/s = ${((steady / ideal) * 100).toFixed(0)}% of ideal (${ideal}); ` +
        `workers' CPU ${(workerCpuMs / summary.steps.total).toFixed(2)} ms per step (with each loading the env once); coordinator CPU ${((used.user + used.system) / 1000 / summary.steps.total).toFixed(3)} ms per step over the whole run, ${steadyCpuMs.toFixed(3)} ms in its middle half`,
    );
    if (n === 1) {
      console.log(`  one worker: ${(steady / ideal).toFixed(2)} of its slots' ideal, ${target("one worker's steady rate, of its slots' ideal", steady / ideal, '', { atLeast: 0.9 })}; coordinator ${steadyCpuMs.toFixed(3)} ms CPU per step (middle half), ${target('coordinator CPU per step', steadyCpuMs, 'ms', { atMost: 0.2 })}`);
    }
  }

  // Takeover: a worker killed mid-call; an idle worker takes its episode once the lease lapses.
  const lease = 2_000;
  const queue = `agent-bench:${process.pid}:takeover:queue`;
  const { run, done } = await coordinate({ env: 'fixtures/distributed', store, queue, out, episodes: 1, maxSteps: 6, toolOptions: { step_ms: 400 } });
  const victim = await startWorker({ store, queue, concurrency: 1, leaseMs: lease });
  const fences = `agent:${run.runId}:{${run.runId}}:fences`;
  while ((await redis.hexists(`agent:${run.runId}:{${run.runId}}:inflight`, '0')) === 0) await new Promise((r) => setTimeout(r, 10));
  const standby = await startWorker({ store, queue, concurrency: 1, leaseMs: lease });
  victim.child.kill('SIGKILL');
  const killedAt = performance.now();
  await victim.child;
  while (Number(await redis.hget(fences, '0')) < 2) await new Promise((r) => setTimeout(r, 10));
  const pickup = performance.now() - killedAt;
  await done;
  await stopWorkers([standby]);
  await dropQueue(store, queue);
  console.log(`takeover of a killed worker's episode: ${(pickup / 1000).toFixed(2)} s with a ${lease / 1000} s lease (target ≤ ${(lease + 1000) / 1000} s)`);
} finally {
  await redis.quit();
  await rm(out, { recursive: true, force: true });
}

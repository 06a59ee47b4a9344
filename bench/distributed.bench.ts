/**
 * Distributed runs on this machine: throughput with 1, 2 and 4 `agent worker` processes (8
 * episodes in hand each) on a 20 ms tool, against the ideal (every slot busy: 50 steps/s per slot);
 * the coordinator's CPU per episode; and how long a killed worker's episode waits to be taken over
 * (target: lease + 1 s).
 */
import { Redis } from 'ioredis';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { coordinate, dropQueue, startWorker, stopWorkers } from '../scripts/distributed-harness.js';

const store = process.env['AGENT_STORE'] ?? 'redis://127.0.0.1:6379/0';
const out = await mkdtemp(path.join(os.tmpdir(), 'agent-bench-distributed-'));
const redis = new Redis(store);
const CONCURRENCY = 8;
const STEP_MS = 20;

try {
  for (const n of [1, 2, 4]) {
    const queue = `agent-bench:${process.pid}:${n}:queue`;
    const workers = await Promise.all(Array.from({ length: n }, () => startWorker({ store, queue, concurrency: CONCURRENCY, leaseMs: 10_000 })));
    const episodes = 48 * n;
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    const { done } = await coordinate({ env: 'fixtures/distributed', store, queue, out, episodes, maxSteps: 10, toolOptions: { step_ms: STEP_MS } });
    const summary = await done;
    const seconds = (performance.now() - t0) / 1000;
    const used = process.cpuUsage(cpu);
    await stopWorkers(workers);
    await dropQueue(store, queue);
    const perSecond = summary.steps.total / seconds;
    const ideal = (n * CONCURRENCY * 1000) / STEP_MS;
    console.log(`${n} worker(s) × ${CONCURRENCY}: ${summary.steps.total} steps in ${seconds.toFixed(2)} s = ${perSecond.toFixed(0)} steps/s, ${((perSecond / ideal) * 100).toFixed(0)}% of ideal (${ideal}); coordinator CPU ${((used.user + used.system) / 1000 / episodes).toFixed(2)} ms per episode`);
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

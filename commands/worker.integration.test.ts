/**
 * Distributed runs under faults, on real Redis with `agent worker` processes: workers killed
 * (SIGKILL), paused past their lease (SIGSTOP), stopped (SIGTERM, twice), Redis restarted, an
 * episode that kills every worker running it, and the coordinator itself killed and resumed.
 * CI runs reduced kill counts; scripts/distributed-crash-test.ts runs the full 25.
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canStartRedis, sharedRedisAvailable, startOwnRedis, TEST_REDIS_URL } from '../src/state/redis-testing.js';
import { verify } from '../scripts/crash-harness.js';
import { coordinate, dropQueue, inProcessWorker, killWorkers, startWorker, stopWorkers, type WorkerProcess } from '../scripts/distributed-harness.js';
import type { RunEvent } from '../src/events/run-events.js';
import type { EpisodeRecord } from '../src/replay/run-writer.js';
import { distributedKeys } from '../src/run/distributed-keys.js';
import { RedisStateStore } from '../src/state/redis-store.js';
import { otelConfig, type OtelConfig } from '../src/observe/otel-config.js';
import { FakeOtlpCollector } from '../src/observe/fake-otlp-collector.js';

const ENV = 'fixtures/distributed';
const available = await sharedRedisAvailable('the distributed-run fault tests');
const ownRedis = available && (await canStartRedis());

async function lines<T>(file: string): Promise<T[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as T);
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!available)('agent worker: distributed runs under faults', () => {
  let dir: string;
  let redis: Redis;
  const queues: string[] = [];
  const queue = (): string => {
    const q = `agent-test:${process.pid}:${Math.random().toString(36).slice(2, 8)}:queue`;
    queues.push(q);
    return q;
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agent-worker-'));
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    for (const q of queues) await dropQueue(TEST_REDIS_URL, q);
    await redis.quit();
    await rm(dir, { recursive: true, force: true });
  });

  it('kill -9 of random workers mid-episode: every episode finishes once, every (episode, step) once, nothing left in Redis', async () => {
    const q = queue();
    const kills = 3;
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 24, maxSteps: 8, toolOptions: { step_ms: 100 } });
    const drill = await killWorkers({ store: TEST_REDIS_URL, queue: q, leaseMs: 1500, maxAttempts: 10 }, 3, kills, [200, 500], done);
    const summary = await done;
    expect(drill.kills).toBe(kills);
    expect(summary.status).toBe('completed');
    const report = await verify(path.join(dir, run.runId), run.runId, TEST_REDIS_URL);
    expect(report.problems).toEqual([]);
    expect(report.episodes).toBe(24);
    expect(report.keysLeft).toBe(0);
    // Episodes cut off by a kill were continued elsewhere: started more than once, finished once.
    const events = await lines<RunEvent>(path.join(dir, run.runId, 'events.jsonl'));
    const starts = events.filter((e) => e.type === 'episode_started').length;
    expect(starts).toBeGreaterThan(24);
    expect(summary.distributed?.workers.length).toBeGreaterThan(3);
  });

  it('a worker paused past its lease (SIGSTOP) cannot commit once resumed: its late writes are refused and counted', async () => {
    const q = queue();
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 1, maxSteps: 2, toolOptions: { step_ms: 1500 } });
    const base = `agent:${run.runId}:{${run.runId}}:`;
    const zombie = await startWorker({ store: TEST_REDIS_URL, queue: q, leaseMs: 800, concurrency: 1 });
    await until('the first call in flight', async () => (await redis.hexists(`${base}inflight`, '0')) === 1);
    zombie.child.kill('SIGSTOP');
    const paused = Date.now();
    const successor = await inProcessWorker({ store: TEST_REDIS_URL, queue: q, leaseMs: 800, concurrency: 1 });
    // The successor took the episode and fenced its history (rewound it under the new token).
    await until('the successor to fence the episode', async () => Number(await redis.hget(`agent:${run.runId}:{ep-0}:meta`, 'fence')) >= 2);
    // Let the zombie's own tool call be overdue, so its commit is the first thing it does on waking.
    await new Promise((r) => setTimeout(r, Math.max(0, 1_700 - (Date.now() - paused))));
    zombie.child.kill('SIGCONT');
    const summary = await done;
    await successor.stop();
    await stopWorkers([zombie]);
    expect(summary.status).toBe('completed');
    expect(summary.distributed?.fenced_writes).toBeGreaterThanOrEqual(1);
    expect(zombie.output()).toMatch(/lost the lease on \S+ episode 0/);
    const report = await verify(path.join(dir, run.runId), run.runId, TEST_REDIS_URL);
    expect(report.problems).toEqual([]);
    expect(report.steps).toBe(2);
  });

  it('a poison episode (its tool kills the worker) is retried, then ended as worker_lost with the cause; the others finish', async () => {
    const q = queue();
    // One episode per worker: a worker the poison kills takes no innocent episode down with it.
    const pool = { store: TEST_REDIS_URL, queue: q, leaseMs: 1000, maxAttempts: 1, concurrency: 1 };
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 4, maxSteps: 3, toolOptions: { step_ms: 20, crash_on: 'ep-2', crash_at: 2 } });
    // A supervisor, as Kubernetes would be: a worker that dies is replaced.
    const workers: WorkerProcess[] = [];
    let finished = false;
    void done.finally(() => (finished = true));
    const supervise = async (): Promise<void> => {
      while (!finished) {
        const w = await startWorker(pool);
        workers.push(w);
        await Promise.race([w.child, done.catch(() => undefined)]);
      }
    };
    await Promise.all([supervise(), supervise()]);
    const summary = await done;
    await stopWorkers(workers);
    expect(summary.episodes.by_reason).toEqual({ max_steps: 3, worker_lost: 1 });
    const ends = (await lines<RunEvent>(path.join(dir, run.runId, 'events.jsonl'))).filter((e): e is Extract<RunEvent, { type: 'episode_finished' }> => e.type === 'episode_finished');
    const poisoned = ends.find((e) => e.episode === 2);
    expect(poisoned?.reason).toBe('worker_lost');
    expect(poisoned?.error?.code).toBe('WORKER_LOST');
    expect(poisoned?.error?.message).toMatch(/stopped once without committing a step in between.*call in flight was work/);
    expect(ends.filter((e) => e.episode === 2)).toHaveLength(1);
    // Its record in episodes.jsonl ends at its last committed step (2), not in the call that killed the workers.
    const records = await lines<EpisodeRecord>(path.join(dir, run.runId, 'episodes.jsonl'));
    expect(records.map((r) => r.episode).sort()).toEqual([0, 1, 2, 3]);
    const record = records.find((r) => r.episode === 2);
    expect(record).toMatchObject({ instance_id: 'ep-2', reason: 'worker_lost', steps: 2, final_seq: 2, terminated: false, truncated: true });
    expect(record?.final_patch).toEqual(expect.arrayContaining([{ op: 'replace', path: '/count', value: 2 }]));
    // Its archived history replays to that record, as every other episode's does.
    const report = await verify(path.join(dir, run.runId), run.runId, TEST_REDIS_URL);
    expect(report.problems).toEqual([]);
    expect(report.keysLeft).toBe(0);
  });

  it('giving up an episode whose last worker died between its state write and its step: record and archived history end at the last committed step', async () => {
    const q = queue();
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 1, maxSteps: 3, toolOptions: { step_ms: 20 } });
    // As its workers left it: two deltas in its history, no step committed, more claims since than allowed.
    const store = new RedisStateStore(redis, { prefix: `agent:${run.runId}:` });
    await store.init('ep-0', { count: 0 }, Date.now());
    for (const count of [1, 2]) await store.append('ep-0', { patch: [{ op: 'replace', path: '/count', value: count }], time: Date.now() }, { count });
    const keys = distributedKeys(run.runId);
    await redis.hset(keys.marks, '0', 0);
    await redis.hset(keys.attempts, '0', 3);
    const w = await inProcessWorker({ store: TEST_REDIS_URL, queue: q, maxAttempts: 3 });
    const summary = await done;
    await w.stop();
    expect(summary.episodes.by_reason).toEqual({ worker_lost: 1 });
    const [record] = await lines<EpisodeRecord>(path.join(dir, run.runId, 'episodes.jsonl'));
    expect(record).toMatchObject({ episode: 0, reason: 'worker_lost', steps: 0, final_seq: 0, final_patch: [] });
    const report = await verify(path.join(dir, run.runId), run.runId, TEST_REDIS_URL);
    expect(report.problems).toEqual([]);
    expect(report.keysLeft).toBe(0);
  });

  it('SIGTERM hands the episodes in hand back: another worker finishes them at once, not after the lease', async () => {
    const q = queue();
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 3, maxSteps: 3, toolOptions: { step_ms: 300 } });
    const first = await startWorker({ store: TEST_REDIS_URL, queue: q, concurrency: 3, leaseMs: 30_000, extra: ['--health-port', '0'] });
    await until('three episodes in hand', async () => (first.output().match(/^took /gm) ?? []).length === 3);
    // Its health port serves its metrics: the episodes it took and runs, and the steps of the run it joined.
    const port = /health on :(\d+)/.exec(first.output())?.[1];
    await until('a step settled on the worker', async () => /^agent_steps_total\{/m.test(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()));
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain(`agent_worker_episodes_total{run_id="${run.runId}",event="claimed"} 3`);
    expect(metrics).toMatch(/^agent_worker_running 3$/m);
    expect(metrics).toMatch(new RegExp(`^agent_steps_total\\{run_id="${run.runId}",status="resolved"\\} [1-9]`, 'm'));
    first.child.kill('SIGTERM');
    const result = await first.child;
    expect(result.exitCode).toBe(0);
    expect(first.output().match(/^handed back /gm)).toHaveLength(3);
    // The lease is 30 s: finishing now means the episodes were handed back, not left to lapse.
    const second = await inProcessWorker({ store: TEST_REDIS_URL, queue: q, concurrency: 3, leaseMs: 30_000 });
    const summary = await done;
    expect((await second.stop()).finished).toBe(3);
    expect(summary.episodes.finished).toBe(3);
    expect((await verify(path.join(dir, run.runId), run.runId, TEST_REDIS_URL)).problems).toEqual([]);
  });

  it('a traced distributed run: the coordinator exports the episodes its workers ran, and their calls carry its trace context', async () => {
    const q = queue();
    await using collector = await FakeOtlpCollector.start();
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 3, maxSteps: 2, toolOptions: { step_ms: 1 }, otel: otelConfig({}, collector.url) as OtelConfig });
    const worker = await inProcessWorker({ store: TEST_REDIS_URL, queue: q, concurrency: 3, leaseMs: 30_000 });
    const summary = await done;
    expect((await worker.stop()).finished).toBe(3);
    const spans = collector.spans;
    expect(summary.telemetry?.traces).toMatchObject({ exported: spans.length, dropped: 0 });
    const steps = await lines<{ trace_id: string; observation: { traceparent?: string } }>(path.join(dir, run.runId, 'trajectories.jsonl'));
    const tools = spans.filter((s) => s.name === 'execute_tool work');
    expect(steps).toHaveLength(6);
    // What the worker's tool received is the context of the span the coordinator exported for that call.
    expect(steps.map((s) => s.observation.traceparent).sort()).toEqual(tools.map((s) => `00-${s.traceId}-${s.spanId}-01`).sort());
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    for (const tool of tools) {
      const step = byId.get(tool.parentSpanId);
      expect(step?.name).toMatch(/^step \d+$/);
      expect(byId.get(step?.parentSpanId ?? '')?.name).toMatch(/^episode \d+$/);
    }
    expect(spans.filter((s) => s.name.startsWith('episode ')).map((s) => s.traceId)).toHaveLength(3);
  });

  it('a second SIGTERM exits at once, before the first has handed the episodes back', async () => {
    const q = queue();
    const controller = new AbortController();
    // The tool holds the worker's event loop for 3 s: both signals arrive while it does, so the
    // second is handled right after the first, before any hand-back could have finished.
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 1, maxSteps: 1, toolOptions: { busy_ms: 3_000 }, signal: controller.signal });
    const base = `agent:${run.runId}:{${run.runId}}:`;
    const worker = await startWorker({ store: TEST_REDIS_URL, queue: q, concurrency: 1, leaseMs: 30_000 });
    await until('the call in flight', async () => (await redis.hexists(`${base}inflight`, '0')) === 1);
    worker.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 200));
    worker.child.kill('SIGTERM');
    const exited = await worker.child;
    expect(exited.signal).toBe('SIGTERM');
    controller.abort();
    await done;
    await redis.del(...(await redis.keys(`agent:${run.runId}:*`)));
  });

  it('says within seconds that no worker is alive; the run waits for one', async () => {
    const q = queue();
    const controller = new AbortController();
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 1, maxSteps: 1, signal: controller.signal });
    try {
      await until('the workers check', async () => run.progress().workers !== undefined, 5_000);
      expect(run.progress().workers).toMatchObject({ queue: q, alive: [] });
    } finally {
      controller.abort();
    }
    expect((await done).status).toBe('interrupted');
    // Interrupted, it stays resumable; nothing else is left of it once removed.
    await redis.del(...(await redis.keys(`agent:${run.runId}:*`)), q);
  });

  it('a worker whose env differs (another initial state) refuses the episodes with ENV_MISMATCH; the coordinator says no worker has the env; one that has it runs them', async () => {
    const q = queue();
    const envs = path.join(dir, 'envs-changed');
    await cp(ENV, path.join(envs, 'distributed'), { recursive: true });
    await writeFile(path.join(envs, 'distributed', 'initial_states.json'), '[{ "count": 5 }]');
    const { run, done } = await coordinate({ env: ENV, store: TEST_REDIS_URL, queue: q, out: dir, episodes: 2, maxSteps: 2 });
    const notices: string[] = [];
    run.events.on('notice', (e) => notices.push(`${e.code}: ${e.message}`));
    const problems: string[] = [];
    const wrong = await inProcessWorker({ store: TEST_REDIS_URL, queue: q, envs: [envs] });
    wrong.worker.events.on('problem', (e) => problems.push(e.message));
    try {
      await until('the coordinator to notice', async () => notices.length > 0, 15_000);
      expect(notices[0]).toMatch(/^ENV_MISMATCH: no worker has env [0-9a-f]{16} \('distributed'\): 1 live worker\(s\) refuse/);
      expect(problems[0]).toMatch(/ENV_MISMATCH|is not the one run .* was started with: fingerprint [0-9a-f]{16} here, [0-9a-f]{16} on the coordinator/);
      expect(run.progress().episodes_done).toBe(0);
    } finally {
      await wrong.stop();
    }
    const right = await inProcessWorker({ store: TEST_REDIS_URL, queue: q });
    try {
      const summary = await done;
      expect(summary).toMatchObject({ status: 'completed', episodes: { finished: 2 } });
      // What ran is the coordinator's env: its initial states, not the changed copy's.
      const states = await lines<{ state: { count: number } }>(path.join(dir, run.runId, 'states.jsonl'));
      expect(states.map((s) => s.state.count).sort()).toEqual([0, 100]);
    } finally {
      await right.stop();
    }
  });

  it('the coordinator killed with SIGKILL is resumed with --resume and writes the whole folder', async () => {
    const q = queue();
    const coordinator = execa('node', ['bin/agent.js', 'run', ENV, '--distributed', '--queue', q, '--store', TEST_REDIS_URL, '--episodes', '6', '--max-steps', '4', '--tool-option', 'step_ms=150', '--out', dir], { reject: false, stdin: 'ignore' });
    let text = '';
    const runId = await new Promise<string>((resolve) => {
      coordinator.stderr?.on('data', (c: Buffer) => {
        text += c.toString();
        const m = /^run (\S+):/m.exec(text);
        if (m) resolve(m[1] as string);
      });
    });
    const worker = await inProcessWorker({ store: TEST_REDIS_URL, queue: q, concurrency: 2 });
    await until('an episode to finish', async () => /\[\s*1\/6\]/.test(text));
    coordinator.kill('SIGKILL');
    await coordinator;
    const resumed = await execa('node', ['bin/agent.js', 'run', '--resume', runId, '--store', TEST_REDIS_URL], { reject: false, stdin: 'ignore' });
    await worker.stop();
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    const report = await verify(path.join(dir, runId), runId, TEST_REDIS_URL);
    expect(report.problems).toEqual([]);
    expect(report.episodes).toBe(6);
    expect(report.keysLeft).toBe(0);
  });

  it.skipIf(!ownRedis)('Redis restarting while workers run: they reconnect and continue, nothing acknowledged is lost', async () => {
    const own = await startOwnRedis({ appendfsync: 'always' });
    try {
      const q = queue();
      const { run, done } = await coordinate({ env: ENV, store: own.url, queue: q, out: dir, episodes: 10, maxSteps: 5, toolOptions: { step_ms: 60 } });
      const workers = await Promise.all([inProcessWorker({ store: own.url, queue: q, leaseMs: 3_000 }), inProcessWorker({ store: own.url, queue: q, leaseMs: 3_000 })]);
      await until('steps committed', async () => /episode_finished/.test(await readFile(path.join(dir, run.runId, 'events.jsonl'), 'utf8').catch(() => '')));
      await own.kill();
      await new Promise((r) => setTimeout(r, 500));
      await own.start();
      const summary = await done;
      await Promise.all(workers.map((w) => w.stop()));
      expect(summary.status).toBe('completed');
      const report = await verify(path.join(dir, run.runId), run.runId, own.url);
      expect(report.problems).toEqual([]);
      expect(report.episodes).toBe(10);
    } finally {
      await own.close();
    }
  });
});

describe('agent worker: usage', () => {
  it('refuses to start without a Redis URL, and a distributed run without a Redis store, saying what to pass', async () => {
    const worker = await execa('node', ['bin/agent.js', 'worker'], { reject: false, env: { AGENT_STORE: '' }, extendEnv: true });
    expect(worker.exitCode).toBe(2);
    expect(worker.stderr).toMatch(/not a Redis URL|needs the Redis/);
    const run = await execa('node', ['bin/agent.js', 'run', ENV, '--distributed'], { reject: false });
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(/needs a Redis store[\s\S]*--store redis:/);
  });
});

/**
 * Durable runs against a Redis of the test's own (started on a free port with an append-only
 * file): Redis killed and restarted mid-run, per fsync policy; Redis gone for longer than the
 * run's store wait; Redis restarted with nothing on disk. What was acknowledged is never lost
 * silently: the run goes on, or stops saying why and resumes.
 */
import { execa } from 'execa';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { verify } from '../../scripts/crash-harness.js';
import { canStartRedis, startOwnRedis, type OwnRedis } from '../state/redis-testing.js';
import { Run } from './run.js';
import type { RunEvent } from '../events/run-events.js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';

const startable = await canStartRedis();
if (!startable && process.env['CI']) throw new Error('redis-server is required in CI (these tests start their own)');
if (!startable) console.warn('skipping the Redis restart tests: no redis-server on PATH (apt install redis-server)');

const dirs: string[] = [];
const servers: OwnRedis[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function setup(appendfsync: 'always' | 'everysec', appendonly = true): Promise<{ redis: OwnRedis; out: string }> {
  const redis = await startOwnRedis({ appendfsync, appendonly });
  servers.push(redis);
  const out = await mkdtemp(path.join(os.tmpdir(), 'durable-'));
  dirs.push(out);
  return { redis, out };
}

/** Run the weather env on `url`; when `at` names a count of settled steps, its action runs then (kill Redis, …). */
async function durableRun(url: string, out: string, at: Record<number, () => Promise<void>>, storeWaitMs = 30_000) {
  const run = await Run.prepare({ env: 'fixtures/weather', episodes: 8, concurrency: 2, store: url, out, storeWaitMs, toolOptions: { latency_scale: 0.05 } });
  const seen: RunEvent['type'][] = [];
  let steps = 0;
  run.events.onAny((e) => {
    seen.push(e.type);
    if (e.type === 'trace_settled') void at[++steps]?.();
  });
  const summary = await run.execute();
  return { summary, seen, dir: run.dir as string };
}

/** Resume a run stopped by STORE_WRITES_LOST; returns its final summary. */
async function resumeAfterLoss(runId: string, url: string) {
  const resumed = await Run.prepare({ env: '', resume: runId, store: url });
  const lost: number[] = [];
  resumed.events.onAny((e) => {
    if (e.type === 'run_resumed') lost.push(e.lost_steps);
  });
  return { summary: await resumed.execute(), lost };
}

describe.runIf(startable)('durable runs when Redis restarts', () => {
  it.each(['always', 'everysec'] as const)('appendfsync %s: Redis killed and restarted mid-run, the run pauses, goes on, and loses nothing silently', async (mode) => {
    const { redis, out } = await setup(mode);
    const { summary, seen, dir } = await durableRun(redis.url, out, {
      12: async () => {
        await redis.kill();
        await redis.start();
      },
    });
    expect(seen).toContain('store_unavailable');
    let final = summary;
    // Under everysec a kill can still lose acknowledged writes: Redis replies before its write when a
    // background fsync is running (a busy disk), and postpones that write up to 2 s. The journal must
    // say so, and the resume must complete the run. Under always, nothing is ever lost.
    if (mode === 'everysec' && summary.status === 'interrupted') {
      expect(summary.problem).toMatch(/Redis lost/);
      final = (await resumeAfterLoss(summary.run_id, redis.url)).summary;
    } else {
      expect(seen).toContain('store_recovered');
    }
    expect(final).toMatchObject({ status: 'completed', episodes: { finished: 8 } });
    expect(final.problem).toBeUndefined();
    const check = await verify(dir, summary.run_id, redis.url);
    expect(check.problems).toEqual([]);
    expect(check).toMatchObject({ episodes: 8, steps: 80, keysLeft: 0 });
  });

  it('Redis back without its last acknowledged writes (an OS crash under everysec): STORE_WRITES_LOST, and the resume sets the lost steps aside and completes the run', async () => {
    const { redis, out } = await setup('always');
    let kept: Promise<number> | undefined;
    const { summary, dir } = await durableRun(redis.url, out, {
      6: async () => {
        kept = redis.aofSize();
        await kept;
      },
      12: async () => {
        await redis.crashLosingWritesAfter(await (kept as Promise<number>));
        await redis.start();
      },
    });
    expect(summary.status).toBe('interrupted');
    expect(summary.problem).toMatch(/Redis lost/);
    const { summary: final, lost } = await resumeAfterLoss(summary.run_id, redis.url);
    expect(final).toMatchObject({ status: 'completed', episodes: { finished: 8 } });
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeGreaterThan(0);
    const setAside = (await readFile(path.join(dir, 'trajectories.lost.jsonl'), 'utf8')).split('\n').filter(Boolean);
    expect(setAside).toHaveLength(lost[0] as number);
    const check = await verify(dir, summary.run_id, redis.url);
    expect(check.problems).toEqual([]);
    expect(check).toMatchObject({ episodes: 8, steps: 80, keysLeft: 0 });
  });

  it('stops cleanly when Redis stays away past the store wait (exit 1, folder marked), and resumes once it is back', async () => {
    const { redis, out } = await setup('always');
    const child = execa('node', ['bin/agent.js', 'run', 'fixtures/weather', '--episodes', '8', '--concurrency', '2', '--tool-option', 'latency_scale=0.1', '--store', redis.url, '--store-wait', '300ms', '--out', out], { reject: false });
    await new Promise<void>((resolve) => child.stderr?.on('data', (c: Buffer) => c.toString().includes('] episode') && resolve()));
    await redis.kill();
    const first = await child;
    expect(first.exitCode).toBe(1);
    expect(String(first.stderr)).toMatch(/error: Redis at redis:\/\/127\.0\.0\.1:\d+\/0 was unreachable for 300 ms; the run stopped: it can be resumed: agent run --resume \S+ --store redis:\/\/127\.0\.0\.1:\d+\/0$/m);
    const runId = /^run (\S+):/m.exec(String(first.stderr))?.[1] as string;
    await redis.start();
    const resumed = await Run.prepare({ env: '', resume: runId, store: redis.url });
    const summary = await resumed.execute();
    expect(summary).toMatchObject({ status: 'completed', episodes: { finished: 8 } });
    const check = await verify(path.join(out, runId), runId, redis.url);
    expect(check.problems).toEqual([]);
    expect(check.keysLeft).toBe(0);
  });

  it('never goes on silently when Redis comes back empty (no AOF): the run stops with STORE_WRITES_LOST', async () => {
    const { redis, out } = await setup('always', false);
    const { summary, dir } = await durableRun(redis.url, out, {
      12: async () => {
        await redis.kill();
        await redis.start();
      },
    });
    expect(summary.status).toBe('interrupted');
    expect(summary.problem).toMatch(/Redis lost/);
    // The folder agrees with itself: every episode record counts the steps trajectories.jsonl has of it.
    const lines = async (file: string): Promise<Record<string, number>[]> => (await readFile(path.join(dir, file), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, number>);
    const steps = await lines('trajectories.jsonl');
    for (const e of await lines('episodes.jsonl')) expect(e['steps'], `episode ${e['episode']}`).toBe(steps.filter((t) => t['episode'] === e['episode']).length);
  });
});

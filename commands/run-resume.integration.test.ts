/**
 * `agent run --resume` on the shared Redis: a run killed with SIGKILL at random moments and
 * resumed each time finishes every episode once, with one trajectory line per committed step
 * (scripts/crash-test.ts runs the same with 25 kills), and a resume says what is wrong when it
 * cannot continue.
 */
import { readdir } from 'node:fs/promises';
import { execa } from 'execa';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { crashRun, idempotentWeather } from '../scripts/crash-harness.js';
import { sharedRedisAvailable, TEST_REDIS_URL } from '../src/state/redis-testing.js';
import { interruptAfterFirstEpisode, readRunSummary, runAgent, scratch } from './testing.js';

const available = await sharedRedisAvailable('the agent run --resume tests');
const tmp = scratch();
afterAll(() => tmp.cleanup());

describe.runIf(available)('agent run --resume', () => {
  it('survives kill -9 at random moments: every episode once, no step lost or doubled, history replays to the final state', async () => {
    const report = await crashRun({
      env: 'fixtures/weather',
      store: TEST_REDIS_URL,
      out: await tmp.dir('crash-'),
      episodes: 16,
      concurrency: 4,
      kills: 3,
      seed: 7,
      killAfterMs: [150, 600],
      toolOptions: ['latency_scale=0.1'],
    });
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ exitCode: 0, status: 'completed', episodes: 16, kills: 3, keysLeft: 0 });
  });

  it('re-runs a call cut off by the crash when its tool is idempotent, instead of settling it as TOOL_LOST', async () => {
    const dir = await tmp.dir('crash-idem-');
    const report = await crashRun({
      env: await idempotentWeather(dir),
      store: TEST_REDIS_URL,
      out: dir,
      episodes: 8,
      concurrency: 4,
      kills: 1,
      seed: 3,
      killAfterMs: [150, 500],
      toolOptions: ['latency_scale=0.1'],
    });
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ exitCode: 0, status: 'completed', lostCalls: 0, keysLeft: 0 });
  });

  it('continues an interrupted run (Ctrl-C) into the same folder', async () => {
    const out = await tmp.dir('interrupted-');
    const first = await interruptAfterFirstEpisode(['fixtures/weather', '--episodes', '6', '--concurrency', '2', '--tool-option', 'latency_scale=0.1', '--store', TEST_REDIS_URL, '--out', out]);
    expect(first.exitCode).toBe(130);
    const interrupted = await readRunSummary(out);
    expect(interrupted.status).toBe('interrupted');
    const runId = (interrupted as unknown as { run_id: string }).run_id;
    const { code, stderr } = await runAgent(['run', '--resume', runId, '--store', TEST_REDIS_URL]);
    expect(code).toBe(0);
    expect(stderr).toMatch(/^resumed: \d+ episodes finished before/m);
    expect(await readRunSummary(out)).toMatchObject({ status: 'completed', episodes: { finished: 6 } });
  });

  it('refuses to continue a history with a hole: STATE_CORRUPT naming the key and the missing seq, not a bug report', async () => {
    const out = await tmp.dir('hole-');
    const redis = new Redis(TEST_REDIS_URL);
    let runId = '';
    // Interrupted once an episode has two to five deltas of its ten steps: it is still running
    // then, whatever the machine's load (waiting for another episode's end instead raced them).
    const child = execa('node', ['bin/agent.js', 'run', 'fixtures/weather', '--episodes', '6', '--concurrency', '3', '--max-steps', '10', '--tool-option', 'latency_scale=0.2', '--store', TEST_REDIS_URL, '--out', out], { reject: false });
    try {
      let key: string | undefined;
      while (key === undefined) {
        if (child.exitCode !== null) throw new Error(`the run ended before an episode was half-way: ${String((await child).stderr)}`);
        await new Promise((r) => setTimeout(r, 20));
        runId ||= (await readdir(out).catch(() => []))[0] ?? '';
        if (!runId) continue;
        const keys = await redis.keys(`agent:${runId}:{ep-*}:deltas`);
        const lengths = await Promise.all(keys.map((k) => redis.xlen(k)));
        key = keys.find((_, i) => (lengths[i] ?? 0) >= 2 && (lengths[i] ?? 0) <= 5);
      }
      child.kill('SIGINT');
      expect((await child).exitCode).toBe(130);
      // That episode's first delta goes missing.
      await redis.xdel(key, '1-1');
      const resumed = await runAgent(['run', '--resume', runId, '--store', TEST_REDIS_URL]);
      expect(resumed.code).toBe(1);
      expect(resumed.stderr).toContain(`error: Redis key '${key}' has no delta for seq 1`);
      expect(resumed.stderr).not.toMatch(/internal error|This is a bug/);
    } finally {
      child.kill('SIGKILL');
      await child;
      const left = runId ? await redis.keys(`agent:${runId}:*`) : [];
      if (left.length > 0) await redis.del(...left);
      redis.disconnect();
    }
  });

  it('says what is wrong when it cannot resume', async () => {
    const missing = await runAgent(['run', '--resume', '20990101-000000-abcdef', '--store', TEST_REDIS_URL]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/has no run '20990101-000000-abcdef'/);
    const noStore = await runAgent(['run', '--resume', '20990101-000000-abcdef', '--store', 'memory']);
    expect(noStore.code).toBe(2);
    expect(noStore.stderr).toMatch(/resuming a run needs the Redis store it ran on/);
    const both = await runAgent(['run', 'fixtures/weather', '--resume', 'x', '--store', TEST_REDIS_URL]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/not both/);
  });
});

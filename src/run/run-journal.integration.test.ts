/** The run journal on the shared Redis: numbered writes (resends recognised, gaps detected), the lease, malformed keys. */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { sharedRedisAvailable, TEST_REDIS_URL } from '../state/redis-testing.js';
import { RunJournal, type JournalRun } from './run-journal.js';
import type { SettledStepEvent } from '../events/run-events.js';

const available = await sharedRedisAvailable('the run journal tests');
const PREFIX = `agent-test:${process.pid}:${Math.random().toString(36).slice(2, 10)}:`;

function step(episode: number, n: number): SettledStepEvent {
  return { type: 'trace_settled', time: n, instance_id: `ep-${episode}`, trace_id: `ep-${episode}:${n}`, episode, step: n, action: 'a', params: {}, seq_before: n - 1, status: 'resolved', reward: 1, rewards: {}, done: false, seq: n, duration_ms: 1 };
}

const run = (id: string): JournalRun => ({ run_id: id, started_at: 0, env_dir: '/env', out: '/out', config: { env: 'e', episodes: 2, concurrency: 1, max_steps: 3, seed: 0, policy: 'random' } });

describe.runIf(available)('RunJournal', () => {
  const redis = new Redis(TEST_REDIS_URL, { enableAutoPipelining: true });
  let n = 0;
  const journal = (): RunJournal => new RunJournal(redis, `run${++n}`, `${PREFIX}run${n}:`);

  afterAll(async () => {
    const keys = await redis.keys(`${PREFIX}*`);
    if (keys.length > 0) await redis.del(...keys);
    expect(await redis.keys(`${PREFIX}*`)).toEqual([]);
    await redis.quit();
  });

  it('reads back what was written: the run, episodes, the call in flight, steps and rewards in order', async () => {
    const j = journal();
    await j.create(run(j.runId));
    await j.episodeStarted(0, { status: 'running', instance_id: 'ep-0', initial_state_id: 'initial-0', started_at: 5 });
    await j.dispatching(0, { trace_id: 'ep-0:1', action: 'a', params: {}, available_actions: ['a'] });
    const before = await j.read();
    expect(before?.inflight.get(0)?.trace_id).toBe('ep-0:1');
    await Promise.all([j.step(step(0, 1)), j.step(step(0, 2)), j.reward({ type: 'reward_arrived', time: 3, trace_id: 'ep-0:1', instance_id: 'ep-0', episode: 0, step: 1, source: 's', value: 1 })]);
    const after = await j.read();
    expect(after?.steps.map((s) => s.step)).toEqual([1, 2]);
    expect(after?.rewards).toHaveLength(1);
    // A committed step clears its episode's call in flight.
    expect(after?.inflight.size).toBe(0);
    expect(after?.episodes.get(0)?.status).toBe('running');
    await expect(j.create(run(j.runId))).rejects.toMatchObject({ code: 'BAD_USAGE' });
  });

  it('sends the writes of one turn as one script call, applied in the order issued', async () => {
    const client = new Redis(TEST_REDIS_URL, { enableAutoPipelining: true });
    try {
      const j = new RunJournal(client, `run${++n}`, `${PREFIX}run${n}:`);
      await j.create(run(j.runId));
      const calls = vi.spyOn(client as unknown as { agentJournalWrite: () => Promise<unknown> }, 'agentJournalWrite');
      // 64 episodes, each started, its first call noted, committed, and its second call noted: in one turn.
      const writes: Promise<void>[] = [];
      for (let e = 0; e < 64; e++) {
        writes.push(j.episodeStarted(e, { status: 'running', instance_id: `ep-${e}`, initial_state_id: 'initial-0', started_at: 1 }));
        writes.push(j.dispatching(e, { trace_id: `ep-${e}:1`, action: 'a', params: {}, available_actions: ['a'] }));
        writes.push(j.step(step(e, 1)));
        writes.push(j.dispatching(e, { trace_id: `ep-${e}:2`, action: 'a', params: {}, available_actions: ['a'] }));
      }
      await Promise.all(writes);
      // (ioredis's auto-pipeline calls the command's method on its pipeline too: count the client's calls.)
      const sent = (): number => calls.mock.contexts.filter((c) => c === client).length;
      expect(sent()).toBe(1);
      const back = await j.read();
      expect(back?.steps.map((s) => s.episode)).toEqual([...Array(64).keys()]);
      // The commit cleared the first call, the note after it stands.
      expect([...(back?.inflight.values() ?? [])].map((c) => c.trace_id)).toEqual([...Array(64).keys()].map((e) => `ep-${e}:2`));
      await j.episodeFinished(0, undefined, { type: 'episode_finished', time: 2, instance_id: 'ep-0', episode: 0, steps: 1, reward: 1, reason: 'done', duration_ms: 1 });
      expect((await j.read())?.inflight.has(0)).toBe(false);
      expect(sent()).toBe(2);
    } finally {
      await client.quit();
    }
  });

  it('answers a resent write (same number) without writing it twice', async () => {
    const j = journal();
    await j.create(run(j.runId));
    await j.step(step(0, 1));
    // A second process that believes entry 1 is next (its reply was lost) sends it again.
    const write = (redis as unknown as Record<string, (...a: (string | number)[]) => Promise<number>>)['agentJournalWrite'] as (...a: (string | number)[]) => Promise<number>;
    const keys = ['meta', 'steps', 'rewards', 'inflight', 'episodes'].map((k) => `${PREFIX}run${n}:{${j.runId}}:${k}`);
    expect(await write.call(redis, ...keys, 'S', 1, JSON.stringify(step(0, 1)), 0)).toBe(1);
    expect((await j.read())?.steps).toHaveLength(1);
  });

  it('detects writes Redis lost (a restart without them on disk): STORE_WRITES_LOST, and the run is told', async () => {
    const j = journal();
    const failures: string[] = [];
    j.onFailure = (err) => failures.push(err.code);
    await j.create(run(j.runId));
    await j.step(step(0, 1));
    await j.step(step(0, 2));
    // What an AOF replay that lost the last second would leave: entry 2 and its count gone.
    await redis.xdel(`${PREFIX}run${n}:{${j.runId}}:steps`, '2-0');
    await redis.hset(`${PREFIX}run${n}:{${j.runId}}:meta`, 'steps', 1);
    await expect(j.step(step(0, 3))).rejects.toMatchObject({ code: 'STORE_WRITES_LOST', message: expect.stringContaining('ends at entry 1') });
    expect(failures).toEqual(['STORE_WRITES_LOST']);
    await expect(j.flushed()).rejects.toMatchObject({ code: 'STORE_WRITES_LOST' });
  });

  it('refuses hand-edited entries with STATE_CORRUPT naming the key', async () => {
    const j = journal();
    await j.create(run(j.runId));
    await j.step(step(0, 1));
    await redis.hset(`${PREFIX}run${n}:{${j.runId}}:episodes`, '0', '{not json');
    await expect(j.read()).rejects.toMatchObject({ code: 'STATE_CORRUPT', message: expect.stringContaining(`{${j.runId}}:episodes`) });
    await redis.hdel(`${PREFIX}run${n}:{${j.runId}}:episodes`, '0');
    // Valid JSON of another shape: named the same way, never a TypeError later.
    for (const [key, field, value] of [
      ['episodes', '0', '{"status":"finished"}'],
      ['episodes', '0', '[1,2]'],
      ['inflight', '0', '{"trace_id":7}'],
      ['meta', 'run', '{"run_id":"x"}'],
    ] as const) {
      const before = await redis.hget(`${PREFIX}run${n}:{${j.runId}}:${key}`, field);
      await redis.hset(`${PREFIX}run${n}:{${j.runId}}:${key}`, field, value);
      await expect(j.read(), `${key} ${value}`).rejects.toMatchObject({ code: 'STATE_CORRUPT', message: expect.stringMatching(new RegExp(`\\{${j.runId}\\}:${key}' \\(.+\\) is malformed: an? `)) });
      if (before === null) await redis.hdel(`${PREFIX}run${n}:{${j.runId}}:${key}`, field);
      else await redis.hset(`${PREFIX}run${n}:{${j.runId}}:${key}`, field, before);
    }
    await redis.hset(`${PREFIX}run${n}:{${j.runId}}:episodes`, 'x', '{"status":"running","instance_id":"ep-0","initial_state_id":"initial-0","started_at":1}');
    await expect(j.read()).rejects.toMatchObject({ message: expect.stringContaining("field 'x'") });
  });

  it('holds the run for one live process: a second is refused; a dead owner on this host is taken over at once', async () => {
    const j = journal();
    await j.create(run(j.runId));
    await j.acquire();
    const other = new RunJournal(redis, j.runId, `${PREFIX}run${n}:`);
    await expect(other.acquire()).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining(`pid ${process.pid}`) });
    await j.release();
    await other.acquire();
    other[Symbol.dispose]();
    // A lease left by a process that no longer runs (pid 2^22 + 1 is beyond Linux's pid range).
    await redis.set(`${PREFIX}run${n}:{${j.runId}}:lease`, JSON.stringify({ pid: 4_194_305, host: (await import('node:os')).hostname() }), 'PX', 60_000);
    const third = new RunJournal(redis, j.runId, `${PREFIX}run${n}:`);
    await third.acquire();
    await third.release();
  });
});

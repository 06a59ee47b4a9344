/**
 * The queue's leases and the fenced journal on real Redis, in this process: a lapsed lease is
 * simulated by setting the entry's idle time (XCLAIM … IDLE), never by waiting.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedRedisAvailable, TEST_REDIS_URL } from '../state/redis-testing.js';
import { distributedKeys } from './distributed-keys.js';
import { EpisodeQueue, type Claim } from './episode-queue.js';
import { FencedJournal, readEvents } from './fenced-journal.js';
import type { SettledStepEvent } from '../events/run-events.js';

const available = await sharedRedisAvailable('the episode queue tests');
const RUN = `queue-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const QUEUE = `agent-test:${RUN}:queue`;

describe.skipIf(!available)('EpisodeQueue and FencedJournal', () => {
  let redis: Redis;
  let blocking: Redis;
  let queue: EpisodeQueue;
  const claim = (consumer: string, count = 1): Promise<Claim[]> => queue.claim(consumer, { count, leaseMs: 1_000, blockMs: 10, blocking });
  /** The holder stopped renewing a minute ago: its lease has lapsed. */
  const lapse = (c: Claim): Promise<unknown> => redis.xclaim(QUEUE, 'workers', 'nobody', 0, c.entryId, 'IDLE', 60_000, 'JUSTID');

  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL);
    blocking = new Redis(TEST_REDIS_URL);
    queue = new EpisodeQueue(redis, QUEUE);
    await queue.enqueue(RUN, [0, 1, 2]);
  });
  afterAll(async () => {
    await queue.retire(RUN);
    await redis.del(QUEUE, `${QUEUE}:workers`, ...(await redis.keys(`agent:${RUN}:*`)));
    await redis.quit();
    await blocking.quit();
  });

  it('leases episodes with increasing fencing tokens; a lapsed lease is taken over and the old holder can neither renew nor ack', async () => {
    const [a0, a1] = await claim('a', 2);
    expect([a0?.episode, a1?.episode, a0?.token, a0?.attempts]).toEqual([0, 1, 1, 1]);
    expect(((await redis.xpending(QUEUE, 'workers')) as unknown[])[0]).toBe(2);
    expect(await queue.renew('a', a0 as Claim)).toBe(true);

    await lapse(a0 as Claim);
    const [b0] = await claim('b');
    expect(b0).toMatchObject({ episode: 0, token: 2, attempts: 2, previousOwner: 'a' });
    expect(await queue.renew('a', a0 as Claim)).toBe(false);
    expect(await queue.ack(a0 as Claim)).toBe(false);

    // A hand-back re-queues the episode at once, under a new token, without counting an attempt.
    expect(await queue.handBack(b0 as Claim)).toBe(true);
    const claimed = await claim('c', 2);
    const c0 = claimed.find((c) => c.episode === 0) as Claim;
    expect(c0.token).toBeGreaterThan(2);
    expect(c0.attempts).toBe(2);
    for (const c of [...claimed, a1 as Claim]) expect(await queue.ack(c)).toBe(true);
    expect(((await redis.xpending(QUEUE, 'workers')) as unknown[])[0]).toBe(0);
    expect(await redis.xlen(QUEUE)).toBe(0);
  });

  it('refuses every write of a stale token, counting it; numbers steps so a resend is not doubled and a gap is reported', async () => {
    await redis.hset(distributedKeys(RUN).fences, '5', 3);
    const journal = new FencedJournal(redis, RUN, 'w1');
    const step = (n: number): SettledStepEvent => ({ type: 'trace_settled', time: n, instance_id: 'ep-5', trace_id: `ep-5:${n}`, episode: 5, step: n, action: 'work', params: {}, seq_before: n - 1, status: 'resolved', reward: 0, rewards: {}, done: false, seq: n, duration_ms: 1 });

    journal.hold(5, 2);
    await expect(journal.step(step(1))).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect(await redis.hget(distributedKeys(RUN).meta, 'fenced')).toBe('1');

    journal.hold(5, 3);
    journal.publish(5, { type: 'episode_started', time: 0, instance_id: 'ep-5', episode: 5, initial_state_id: 'initial-0' });
    await journal.step(step(1));
    await journal.step(step(1));
    await journal.step(step(2));
    await expect(journal.step(step(4))).rejects.toMatchObject({ code: 'STORE_WRITES_LOST' });
    expect((await journal.progress(5)).steps.map((s) => s.step)).toEqual([1, 2]);
    // The queued event went out ahead of the first step, in the same script; the resent step is in the stream once.
    const events = await readEvents(redis, RUN, '0', 100, 0);
    expect(events.map((e) => (e.event.type === 'trace_settled' ? e.event.step : e.event.type))).toEqual(['episode_started', 1, 2]);
    // Numbered per writer and episode, increasing in stream order: what a reader dedupes resends by.
    const numbers = events.map((e) => /^w1\/5\/(\d+)$/.exec(e.uid)?.[1]).map(Number);
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    expect(new Set(numbers).size).toBe(3);
  });

  it('lists live workers and prunes dead ones: from the registry, and from the group once they hold no entry', async () => {
    const now = Date.now();
    const beat = { host: 'h', pid: 1, concurrency: 2, running: 0, finished: 0, fenced: 0 };
    await queue.heartbeat({ ...beat, id: 'live', at: now });
    await queue.heartbeat({ ...beat, id: 'stale', at: now - 6_000 });
    await queue.heartbeat({ ...beat, id: 'gone', at: now - 600_000 });
    expect((await queue.workers(now, 5_000)).map((w) => w.id)).toEqual(['live']);
    expect(Object.keys(await redis.hgetall(`${QUEUE}:workers`))).toEqual(['live']);
    // Two dead consumers: one acknowledged what it took, one died holding an entry.
    await queue.enqueue(RUN, [7, 8]);
    const [done] = await claim('dead-done');
    await queue.ack(done as Claim);
    const [held] = await claim('dead-holding');
    const consumers = async (): Promise<string[]> => ((await redis.xinfo('CONSUMERS', QUEUE, 'workers')) as unknown[][]).map((c) => String(c[1])).sort();
    expect(await consumers()).toEqual(expect.arrayContaining(['dead-done', 'dead-holding']));
    await queue.workers(now, 0);
    expect(await consumers()).toEqual(['dead-holding']);
    // Its entry goes to a live worker when its lease lapses; then it is pruned too.
    await lapse(held as Claim);
    const [taken] = await claim('live');
    expect(taken?.episode).toBe(8);
    await queue.ack(taken as Claim);
    await queue.workers(now, 0);
    expect(await consumers()).toEqual(['live']);
  });
});

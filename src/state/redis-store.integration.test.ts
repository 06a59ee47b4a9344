/**
 * The Redis adapter against the one conformance suite, on a real Redis (127.0.0.1:6379 unless
 * AGENT_TEST_REDIS says otherwise). Keys carry a random prefix per test run and are deleted after;
 * nothing else in the server is touched. In CI a missing Redis fails the run; on a developer
 * machine without one the suite is skipped with a message saying how to start one.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { AgentEnv, defineEnv, RedisStateStore, type JsonValue } from '../internal.js';
import { APPEND_SCRIPT } from './redis-store.js';
import { describeStateStore } from './store.conformance.js';

const URL_ = process.env['AGENT_TEST_REDIS'] ?? 'redis://127.0.0.1:6379/0';
const PREFIX = `agent-test:${process.pid}:${Math.random().toString(36).slice(2, 10)}:`;

async function reachable(): Promise<boolean> {
  const probe = new Redis(URL_, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2_000 });
  try {
    await probe.connect();
    await probe.ping();
    return true;
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

const available = await reachable();
if (!available && process.env['CI']) throw new Error(`Redis is required in CI and is not reachable at ${URL_}`);
if (!available) console.warn(`skipping the Redis store tests: no Redis at ${URL_} (start one with \`redis-server --save '' --port 6379\`)`);

describe.runIf(available)('RedisStateStore', () => {
  const clients: Redis[] = [];
  const client = (): Redis => {
    const c = new Redis(URL_, { enableAutoPipelining: true });
    clients.push(c);
    return c;
  };

  afterAll(async () => {
    const admin = new Redis(URL_);
    let cursor = '0';
    do {
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await admin.del(...keys);
    } while (cursor !== '0');
    const left = await admin.keys(`${PREFIX}*`);
    await admin.quit();
    await Promise.all(clients.map((c) => c.quit()));
    expect(left).toEqual([]);
  });

  describeStateStore('redis', (options) => new RedisStateStore(client(), { ...options, prefix: PREFIX }));
  // What a cluster gets (its instances' keys live in different slots): each append as its own script
  // call. The store is told it holds a cluster; the client itself (its methods run on it) stays one.
  const asCluster = (c: Redis): Redis =>
    new Proxy(c, { get: (target, key) => (key === 'isCluster' ? true : typeof Reflect.get(target, key) === 'function' ? (Reflect.get(target, key) as (...a: unknown[]) => unknown).bind(target) : Reflect.get(target, key)) });
  describeStateStore('redis, one script call per append (as on a cluster)', (options) => new RedisStateStore(asCluster(client()), { ...options, prefix: PREFIX }));

  it('keeps every key of an instance in one cluster slot (hash tag) under the prefix', async () => {
    const redis = client();
    const store = new RedisStateStore(redis, { prefix: PREFIX });
    await store.init('tagged', { n: 0 }, 1);
    await store.append('tagged', { patch: [{ op: 'replace', path: '/n', value: 1 }], time: 2 }, { n: 1 });
    const keys = await redis.keys(`${PREFIX}*tagged*`);
    expect(keys.length).toBeGreaterThanOrEqual(3);
    expect(keys.every((k) => k.startsWith(`${PREFIX}{tagged}:`))).toBe(true);
  });

  it('never lets two writers both write seq n: the second refreshes its head and appends after', async () => {
    const a = new RedisStateStore(client(), { prefix: PREFIX });
    const b = new RedisStateStore(client(), { prefix: PREFIX });
    await a.init('shared', { n: 0 }, 1);
    const seqs = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).append('shared', { patch: [{ op: 'replace', path: '/n', value: i }], time: 2 + i }, { n: i })));
    expect([...seqs].sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const deltas = await a.read('shared', 1, 20);
    expect(deltas.map((d) => d.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('sends the appends of one turn, of many instances, as one script call; one refused append fails only itself', async () => {
    const redis = client();
    const store = new RedisStateStore(redis, { prefix: PREFIX, snapshotEvery: 3 });
    const ids = Array.from({ length: 40 }, (_, i) => `wave-${i}`);
    await Promise.all(ids.map((id) => store.init(id, { n: 0 }, 1)));
    await store.append('wave-7', { patch: [{ op: 'replace', path: '/n', value: 1 }], time: 2 }, { n: 1 });
    const calls = vi.spyOn(redis as unknown as { agentAppendMany: () => Promise<unknown> }, 'agentAppendMany');
    // The instance under another writer's head fails with its own error; the other 39 land.
    await redis.hset(`${PREFIX}{wave-3}:meta`, 'head_time', 1e15);
    await redis.del(`${PREFIX}{wave-5}:meta`);
    const results = await Promise.allSettled(ids.map((id, i) => store.append(id, { patch: [{ op: 'replace', path: '/n', value: i }], time: 3 }, { n: i })));
    // (ioredis's auto-pipeline calls the command's method on its pipeline too: count the client's calls.)
    expect(calls.mock.contexts.filter((c) => c === redis)).toHaveLength(1);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : 'refused'))).toEqual(ids.map((id) => (id === 'wave-5' ? 'refused' : id === 'wave-7' ? 2 : 1)));
    expect((results[5] as PromiseRejectedResult).reason).toMatchObject({ code: 'STORE_WRITES_LOST' });
    // A later time than the append's stands (time never goes back), in the batch as alone.
    expect((await store.read('wave-3', 1, 1))[0]?.time).toBe(1e15);
    expect((await store.stateAt('wave-7', { seq: 2 })).state).toEqual({ n: 7 });
  });

  it('backs an env: a step commits to Redis and time travel reads it back', async () => {
    const store = new RedisStateStore(client(), { prefix: PREFIX, snapshotEvery: 2 });
    const def = await defineEnv({ state: { type: 'object', properties: { n: { type: 'integer' } } }, actions: [{ name: 'inc', parameters: { type: 'object' } }] });
    await using env = await AgentEnv.create(def, { store, handlers: { inc: (_p, ctx) => ({ patch: [{ op: 'replace', path: '/n', value: ((ctx.state as { n: number }).n ?? 0) + 1 }] }) } });
    const agent = env.createInstance({ id: 'redis-env' });
    await agent.reset({ n: 0 });
    for (let i = 0; i < 5; i++) await agent.step({ name: 'inc' });
    const states = await Promise.all([0, 1, 2, 3, 4, 5].map(async (seq) => (await agent.stateAt({ seq })).state as JsonValue));
    expect(states).toEqual([0, 1, 2, 3, 4, 5].map((n) => ({ n })));
  });

  it('survives its connection being killed mid-run: the client reconnects, retried appends are not doubled', async () => {
    const name = `agent-test-${process.pid}-kill`;
    const store = await RedisStateStore.connect(URL_, { prefix: PREFIX, connectionName: name, snapshotEvery: 25 });
    const admin = client();
    const kill = async (): Promise<number> => {
      const ids = String(await admin.client('LIST')).split('\n').filter((l) => l.includes(` name=${name} `)).map((l) => /id=(\d+)/.exec(l)?.[1]);
      for (const id of ids) if (id) await admin.client('KILL', 'ID', id);
      return ids.length;
    };
    try {
      await store.init('blip', { n: 0 }, 0);
      const appends: Promise<number>[] = [];
      let killed = 0;
      for (let i = 1; i <= 300; i++) {
        appends.push(store.append('blip', { patch: [{ op: 'replace', path: '/n', value: i }], time: i }, { n: i }));
        if (i % 100 === 50) killed += await kill();
      }
      const seqs = await Promise.all(appends);
      expect(killed).toBeGreaterThan(0);
      expect(seqs).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
      const values = (await store.read('blip', 1, 400)).map((d) => (d.patch[0] as { value: number }).value);
      expect(values).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
      expect((await store.stateAt('blip', { seq: 300 })).state).toEqual({ n: 300 });
    } finally {
      await store.drop('blip');
      await store[Symbol.asyncDispose]();
    }
  });

  it('makes a resent append idempotent: the same token at the same seq is answered, not written twice', async () => {
    const redis = client();
    redis.defineCommand('appendOnce', { numberOfKeys: 4, lua: APPEND_SCRIPT });
    const store = new RedisStateStore(redis, { prefix: PREFIX });
    await store.init('resend', { n: 0 }, 0);
    const keys = ['meta', 'deltas', 'snaps', 'times'].map((k) => `${PREFIX}{resend}:${k}`);
    const send = (token: string): Promise<number> => (redis as unknown as { appendOnce: (...a: (string | number)[]) => Promise<number> }).appendOnce(...keys, '', 1, '5', '[]', 't1', '', token);
    // A reply lost to a dropped connection: the client sends the same command again.
    expect(await send('tok-1')).toBe(1);
    expect(await send('tok-1')).toBe(1);
    await expect(send('tok-2')).rejects.toThrow(/CONFLICT 1/);
    expect((await store.read('resend', 1, 10)).map((d) => d.seq)).toEqual([1]);
  });

  it('refuses hand-edited data with a typed error naming the key', async () => {
    const redis = client();
    const store = new RedisStateStore(redis, { prefix: PREFIX, snapshotEvery: 100 });
    await store.init('edited', { n: 0 }, 1);
    await store.append('edited', { patch: [{ op: 'replace', path: '/n', value: 1 }], time: 2 }, { n: 1 });
    await redis.xadd(`${PREFIX}{edited}:deltas`, '2-1', 't', '3', 'p', '{not json');
    await redis.hset(`${PREFIX}{edited}:meta`, 'head_seq', 2);
    await expect(store.stateAt('edited', { seq: 2 })).rejects.toMatchObject({ code: 'STATE_CORRUPT', message: expect.stringContaining(`Redis key '${PREFIX}{edited}:deltas' (2-1) is malformed: not JSON`) });
    await redis.zremrangebyscore(`${PREFIX}{edited}:snaps`, 0, 0);
    await redis.zadd(`${PREFIX}{edited}:snaps`, 0, '{"seq": 0}');
    await expect(store.snapshotAt('edited', 0)).rejects.toMatchObject({ code: 'STATE_CORRUPT' });
  });

  it('refuses a database index the server does not have, or one that is not a number, instead of writing to database 0', async () => {
    const base = URL_.replace(/\/\d*$/, '');
    await expect(RedisStateStore.connect(`${base}/99`)).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('has no database 99') });
    await expect(RedisStateStore.connect(`${base}/abc`)).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining("names database 'abc'") });
    await using ok = await RedisStateStore.connect(`${base}/1`, { prefix: PREFIX });
    expect(await ok.bounds('nothing')).toBeUndefined();
  });

  it('refuses a history with a hole (a delta removed, the head one too), naming the key and the missing seq', async () => {
    const redis = client();
    const store = new RedisStateStore(redis, { prefix: PREFIX, snapshotEvery: 100 });
    await store.init('holed', { n: 0 }, 1);
    for (let n = 1; n <= 4; n++) await store.append('holed', { patch: [{ op: 'replace', path: '/n', value: n }], time: n + 1 }, { n });
    await redis.xdel(`${PREFIX}{holed}:deltas`, '2-1');
    const hole = { code: 'STATE_CORRUPT', message: expect.stringContaining(`Redis key '${PREFIX}{holed}:deltas' has no delta for seq 2`) };
    await expect(store.stateAt('holed', { seq: 4 })).rejects.toMatchObject(hole);
    await expect(store.read('holed', 1, 4)).rejects.toMatchObject(hole);
    expect((await store.read('holed', 3, 4)).map((d) => d.seq)).toEqual([3, 4]);
    await redis.xdel(`${PREFIX}{holed}:deltas`, '4-1');
    await expect(store.read('holed', 3, 10)).rejects.toMatchObject({ message: expect.stringContaining('has no delta for seq 4 (its head is seq 4)') });
  });

  it('rewinds to a seq: later deltas, their snapshots and time index go, and appends continue from there', async () => {
    const store = new RedisStateStore(client(), { prefix: PREFIX, snapshotEvery: 2 });
    await store.init('rewound', { n: 0 }, 0);
    for (let i = 1; i <= 5; i++) await store.append('rewound', { patch: [{ op: 'replace', path: '/n', value: i }], time: i * 10 }, { n: i });
    expect(await store.rewind('rewound', 3)).toBe(2);
    expect(await store.bounds('rewound')).toEqual({ oldestSeq: 0, headSeq: 3, headTime: 30 });
    expect(await store.seqAtTime('rewound', 1_000)).toBe(3);
    // A second writer (a resumed run) appends seq 4 again: the stream accepts the id it once held.
    const again = new RedisStateStore(client(), { prefix: PREFIX, snapshotEvery: 2 });
    expect(await again.append('rewound', { patch: [{ op: 'replace', path: '/n', value: 40 }], time: 45 }, { n: 40 })).toBe(4);
    expect((await again.read('rewound', 1, 10)).map((d) => d.seq)).toEqual([1, 2, 3, 4]);
    expect((await again.stateAt('rewound', { seq: 4 })).state).toEqual({ n: 40 });
    expect((await again.snapshotAt('rewound', 10))?.seq).toBe(4);
    expect(await again.rewind('rewound', 9)).toBe(0);
  });

  it('keeps memory bounded over a long history: trimmed to about retainDeltas, never below a snapshot, every kept seq reconstructs', async () => {
    // 15,000 deltas kept to ~1,500: the ratio of the 1M/100k case, which bench/redis-store.bench.ts runs in full.
    const archived: number[] = [];
    const redis = client();
    const store = new RedisStateStore(redis, { prefix: PREFIX, snapshotEvery: 50, retainDeltas: 1_500, archive: (_id, deltas) => void archived.push(...deltas.map((d) => d.seq)) });
    await store.init('long', { n: 0, pad: 'x'.repeat(100) }, 0);
    let longest = 0;
    for (let i = 1; i <= 15_000; i++) {
      await store.append('long', { patch: [{ op: 'replace', path: '/n', value: i }], time: i }, { n: i, pad: 'x'.repeat(100) });
      if (i % 1_000 === 0) longest = Math.max(longest, await redis.xlen(`${PREFIX}{long}:deltas`));
    }
    const bounds = await store.bounds('long');
    expect(bounds?.headSeq).toBe(15_000);
    expect(longest).toBeLessThanOrEqual(1_500 + 2 * 50);
    expect(await redis.zcard(`${PREFIX}{long}:snaps`)).toBeLessThanOrEqual((1_500 + 2 * 50) / 50 + 1);
    const oldest = bounds?.oldestSeq ?? 0;
    expect(oldest % 50).toBe(0);
    // Everything trimmed was archived first, in order, once.
    expect(archived).toEqual(Array.from({ length: oldest }, (_, i) => i + 1));
    for (let seq = oldest; seq <= 15_000; seq += 7) expect((await store.stateAt('long', { seq })).state).toMatchObject({ n: seq });
    await expect(store.stateAt('long', { seq: oldest - 1 })).rejects.toMatchObject({ code: 'STATE_SEQ_TRIMMED' });
    await expect(store.stateAt('long', { time: oldest - 1 })).rejects.toMatchObject({ code: 'STATE_SEQ_TRIMMED' });
  }, 60_000);

  it('says what to check when Redis cannot be reached, without the password', async () => {
    const err = await RedisStateStore.connect('redis://:s3cret@127.0.0.1:1/0').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BAD_USAGE', message: expect.stringMatching(/^cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1\/0: .*ECONNREFUSED/) });
    expect(String((err as Error).message)).not.toContain('s3cret');
  });
});

describe.runIf(available)('agent doctor --store', () => {
  it('reports the longest delta streams under a prefix, and warns (exit 1) past the threshold', async () => {
    const { runAgent } = await import('../../commands/testing.js');
    const store = await RedisStateStore.connect(URL_, { prefix: `${PREFIX}doctor:`, snapshotEvery: 1000 });
    try {
      await store.init('long', { n: 0 }, 0);
      for (let i = 1; i <= 30; i++) await store.append('long', { patch: [{ op: 'replace', path: '/n', value: i }], time: i }, { n: i });
      await store.init('short', { n: 0 }, 0);
      const ok = await runAgent(['doctor', '--store', URL_, '--prefix', `${PREFIX}doctor:`, '--json']);
      expect(ok.code).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ instances: 1, longestStreams: [{ key: `${PREFIX}doctor:{long}:deltas`, length: 30 }], warnings: [] });
      const warned = await runAgent(['doctor', '--store', URL_, '--prefix', `${PREFIX}doctor:`, '--max-stream-length', '10']);
      expect(warned.code).toBe(1);
      expect(warned.stdout).toMatch(/warning: stream .*\{long\}:deltas holds 30 deltas \(over 10\)/);
    } finally {
      await store.drop('long');
      await store.drop('short');
      await store[Symbol.asyncDispose]();
    }
  });
});

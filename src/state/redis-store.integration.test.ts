/**
 * The Redis adapter against the one conformance suite, on a real Redis (127.0.0.1:6379 unless
 * AGENT_TEST_REDIS says otherwise). Keys carry a random prefix per test run and are deleted after;
 * nothing else in the server is touched. In CI a missing Redis fails the run; on a developer
 * machine without one the suite is skipped with a message saying how to start one.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentEnv, defineEnv, RedisStateStore, type JsonValue } from '../index.js';
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
    const send = (token: string): Promise<number> => (redis as unknown as { appendOnce: (...a: (string | number)[]) => Promise<number> }).appendOnce(...keys, 1, '5', '[]', 't1', '', token);
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

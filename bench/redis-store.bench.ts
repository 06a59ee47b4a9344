/**
 * RedisStateStore appends against the local Redis (127.0.0.1:6379, or AGENT_BENCH_REDIS): one
 * instance appending in sequence (a round trip per append), and 256 instances appending at once,
 * whose appends ioredis pipelines per event-loop tick. Keys use a random prefix and are removed.
 */
import { RedisStateStore } from '../src/internal.js';

const url = process.env['AGENT_BENCH_REDIS'] ?? 'redis://127.0.0.1:6379/0';
const prefix = `agent-bench:${process.pid}:`;
await using store = await RedisStateStore.connect(url, { prefix, snapshotEvery: 50 });
const patch = [{ op: 'replace' as const, path: '/n', value: 1 }];
const state = { n: 1, text: 'x'.repeat(200) };

async function appends(instances: number, perInstance: number): Promise<number> {
  const ids = Array.from({ length: instances }, (_, i) => `bench-${instances}-${i}`);
  await Promise.all(ids.map((id) => store.init(id, state, 0)));
  const t0 = performance.now();
  await Promise.all(ids.map(async (id) => {
    for (let k = 1; k <= perInstance; k++) await store.append(id, { patch, time: k }, state);
  }));
  const perSecond = (instances * perInstance) / ((performance.now() - t0) / 1000);
  await Promise.all(ids.map((id) => store.drop(id)));
  return perSecond;
}

const one = await appends(1, 5_000);
const many = await appends(256, 100);
console.log('RedisStateStore appends (local Redis, snapshot every 50):');
console.log(`  one instance, in sequence:   ${Math.round(one).toLocaleString('en-US')} appends/s`);
console.log(`  256 instances at once:       ${Math.round(many).toLocaleString('en-US')} appends/s (pipelined per tick)`);

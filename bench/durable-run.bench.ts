/**
 * Durable runs on the local Redis (127.0.0.1:6379, or AGENT_BENCH_REDIS):
 * 1. Throughput with a no-op tool and small deltas: the env core on the memory store and on Redis,
 *    and `agent run` (Run) in memory and durable (Redis states + the run's journal), beside
 *    `redis-benchmark`'s XADD figure on the same server. Target: ≥ 20k steps/s on Redis.
 * 2. One instance with 1M deltas, trimmed to ~100k as it grows (snapshot every 50): Redis memory
 *    of its keys, and `stateAt` anywhere in the kept range. Target: ≤ 5 ms.
 * Keys use a random prefix (run ids are fresh) and are removed. Runs on the built package (dist/,
 * as users install it; `npm run build` first): the sources through tsx cost ~1.3× the CPU per step.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import type * as Lib from '../src/internal.js';
import type * as RedisStoreModule from '../src/state/redis-store.js';
import { target } from './lib/targets.js';

const built = path.join(import.meta.dirname, '..', 'dist', 'src');
if (!existsSync(path.join(built, 'index.js'))) throw new Error('dist/ is missing: run `npm run build` first');
const { AgentEnv, defineEnv, Run } = (await import(pathToFileURL(path.join(built, 'index.js')).href)) as typeof Lib;
// The Redis store is the package's `agentic-rl-toolkit/store/redis` entry, not the root one.
const { RedisStateStore } = (await import(pathToFileURL(path.join(built, 'store-redis.js')).href)) as typeof Lib;
const { APPEND_SCRIPT } = (await import(pathToFileURL(path.join(built, 'state', 'redis-store.js')).href)) as typeof RedisStoreModule;
type RedisStateStore = Lib.RedisStateStore;
type ToolHandler = Lib.ToolHandler;

const url = process.env['AGENT_BENCH_REDIS'] ?? 'redis://127.0.0.1:6379/0';
const dir = await mkdtemp(path.join(os.tmpdir(), 'durable-bench-'));

// A no-op env: one action that increments a counter (a one-op patch).
await writeFile(
  path.join(dir, 'env.json'),
  JSON.stringify({
    name: 'noop',
    state: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
    actions: [{ name: 'tick', parameters: { type: 'object', properties: {} } }],
    initial_states: [{ n: 0 }],
    module: 'tools.mjs',
  }),
);
await writeFile(path.join(dir, 'tools.mjs'), "export function tick(_p, ctx) { return { observation: null, patch: [{ op: 'replace', path: '/n', value: ctx.state.n + 1 }] }; }\n");

async function runRate(store: string, episodes: number, maxSteps: number, concurrency: number): Promise<number> {
  const run = await Run.prepare({ env: dir, episodes, maxSteps, concurrency, store, out: path.join(dir, 'runs') });
  const t0 = performance.now();
  const summary = await run.execute();
  const rate = summary.steps.total / ((performance.now() - t0) / 1000);
  if (summary.status !== 'completed' || summary.steps.failed > 0) throw new Error(`bench run did not complete cleanly: ${JSON.stringify(summary.problem ?? summary.status)}`);
  return rate;
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** The env core alone (no run folder, no journal) with its states in the memory store or Redis. */
async function coreRate(store: RedisStateStore | undefined, concurrency: number): Promise<number> {
  const def = await defineEnv({ name: 'noop', state: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }, actions: [{ name: 'tick', parameters: { type: 'object', properties: {} } }] });
  const tick: ToolHandler = (_p, ctx) => ({ observation: null, patch: [{ op: 'replace', path: '/n', value: (ctx.state as { n: number }).n + 1 }] });
  await using env = await AgentEnv.create(def, { handlers: { tick }, ...(store ? { store } : { storeOptions: { snapshotEvery: 50, retainDeltas: 1_000 } }) });
  const agents = Array.from({ length: concurrency }, (_, i) => env.createInstance({ id: `core-${concurrency}-${i}` }));
  await Promise.all(agents.map((a) => a.reset({ n: 0 })));
  const per = Math.round(100_000 / concurrency);
  const t0 = performance.now();
  await Promise.all(agents.map(async (a) => {
    for (let i = 0; i < per; i++) await a.step({ name: 'tick', params: {} });
  }));
  const rate = (concurrency * per) / ((performance.now() - t0) / 1000);
  if (store) await Promise.all(agents.map((a) => store.drop(a.id)));
  return rate;
}

console.log('No-op tool, one-op patches, on the local Redis:');
{
  await using coreStore = await RedisStateStore.connect(url, { prefix: `agent-bench:${process.pid}:core:`, snapshotEvery: 50 });
  for (const c of [64, 256]) {
    const memory = await coreRate(undefined, c);
    const redis = await coreRate(coreStore, c);
    console.log(`  env core, ${String(c).padStart(3)} instances: memory store ${fmt(memory)} steps/s · Redis store ${fmt(redis)} steps/s${c === 256 ? `   ${target('env core on Redis, 256 instances, no-op', redis, 'steps/s', { atLeast: 20_000 })}` : ''}`);
  }
}
for (const c of [64, 256]) {
  const memory = await runRate('memory', 400, 100, c);
  const redis = await runRate(url, 400, 100, c);
  const goals = c === 256 ? `   ${target('agent run in memory (run folder written), no-op', memory, 'steps/s', { atLeast: 30_000 })}; ${target('durable agent run (--store redis), no-op', redis, 'steps/s', { atLeast: 10_000 })}` : '';
  console.log(`  agent run, concurrency ${String(c).padStart(3)}: memory ${fmt(memory)} steps/s · durable (Redis states + journal) ${fmt(redis)} steps/s${goals}`);
}
try {
  const u = new URL(url);
  const stream = `agent-bench:${process.pid}:xadd`;
  for (const pipeline of ['1', '16']) {
    const out = execFileSync('redis-benchmark', ['-h', u.hostname, '-p', u.port || '6379', '-n', '200000', '-P', pipeline, '-q', 'XADD', stream, '*', 'p', '[{"op":"replace","path":"/n","value":1}]'], { encoding: 'utf8' });
    console.log(`  redis-benchmark XADD, pipeline ${pipeline.padStart(2)}: ${/([\d.]+) requests per second/.exec(out)?.[1] ?? '?'} /s`);
  }
  execFileSync('redis-cli', ['-h', u.hostname, '-p', u.port || '6379', 'DEL', stream]);
} catch {
  console.log('  (redis-benchmark not found: install redis-tools to compare with the raw XADD rate)');
}

// 2. One long history. Appends of one instance wait for each other in the store (a run's steps
// do); to write 1M in reasonable time the bench sends the store's own append script pipelined,
// with the seq each would get, and trims every 10k as the store does on its own.
const prefix = `agent-bench:${process.pid}:`;
const redis = new Redis(url);
redis.defineCommand('benchAppend', { numberOfKeys: 4, lua: APPEND_SCRIPT });
const store = new RedisStateStore(redis, { prefix, snapshotEvery: 50 });
const id = 'long';
const keys = ['meta', 'deltas', 'snaps', 'times'].map((k) => `${prefix}{${id}}:${k}`);
const TOTAL = 1_000_000;
const KEEP = 100_000;
const t0 = performance.now();
await store.init(id, { n: 0, label: 'bench' }, 0);
const send = (redis as unknown as { benchAppend: (...a: (string | number)[]) => Promise<number> }).benchAppend.bind(redis);
for (let from = 1; from <= TOTAL; from += 10_000) {
  const batch: Promise<number>[] = [];
  for (let seq = from; seq < from + 10_000; seq++) {
    const snapshot = seq % 50 === 0 ? JSON.stringify({ seq, time: seq, state: { n: seq, label: 'bench' } }) : '';
    batch.push(send(...keys, '', seq, String(seq), JSON.stringify([{ op: 'replace', path: '/n', value: seq }]), '', snapshot, `b${seq}`));
  }
  await Promise.all(batch);
  await store.trim(id, KEEP);
}
const writeS = (performance.now() - t0) / 1000;
const bounds = await store.bounds(id);
const memory = (await Promise.all(keys.map((k) => redis.memory('USAGE', k)))).reduce<number>((a, b) => a + (Number(b) || 0), 0);
const samples: number[] = [];
for (let i = 0; i < 2_000; i++) {
  const seq = (bounds?.oldestSeq ?? 0) + Math.floor(Math.random() * ((bounds?.headSeq ?? 0) - (bounds?.oldestSeq ?? 0)));
  const s0 = performance.now();
  await store.stateAt(id, { seq });
  samples.push(performance.now() - s0);
}
samples.sort((a, b) => a - b);
const trimmed = await store.stateAt(id, { seq: 1 }).then(
  () => 'reconstructed (unexpected)',
  (err: { code?: string }) => err.code ?? String(err),
);
console.log(`One instance, ${fmt(TOTAL)} deltas written in ${writeS.toFixed(1)} s, trimmed to keep ~${fmt(KEEP)}:`);
console.log(`  kept seqs ${fmt(bounds?.oldestSeq ?? 0)}…${fmt(bounds?.headSeq ?? 0)}; Redis memory of its keys ${(memory / 1024 / 1024).toFixed(1)} MB; seq 1 → ${trimmed}`);
console.log(`  stateAt over the kept range: p50 ${samples[1_000]?.toFixed(2)} ms, p99 ${samples[1_980]?.toFixed(2)} ms, max ${samples[samples.length - 1]?.toFixed(2)} ms`);
await store.drop(id);
await redis.quit();
await rm(dir, { recursive: true, force: true });

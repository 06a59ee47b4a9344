/**
 * Rollouts on workers (`agent serve --workers`): groups per second with one `agent worker` and
 * with two, each a process of its own running up to C episodes at once, against a fake vLLM server
 * (another process) taking 200 ms per generation. One request of G groups of K = 8 episodes on the
 * lookup suite (2 generations and a 200 ms judge per episode); the serving process only numbers the
 * episodes, takes their deliveries and sends the groups. Needs the Redis at 127.0.0.1:6379 (or
 * AGENT_TEST_REDIS); uses a queue of its own and removes it.
 */
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { serveEnv } from '../src/internal.js';
import { lookupModel } from '../src/serve/rollouts-testing.js';

const GENERATION_MS = 200;
const K = 8;
const GROUPS = 24;
const CONCURRENCY = 16;
const STORE = process.env['AGENT_TEST_REDIS'] ?? 'redis://127.0.0.1:6379/0';

if (process.argv[2] === '--server') {
  const { startFakeVllmServer } = await import('../src/llm/fake-vllm-server.js');
  const server = await startFakeVllmServer({ reply: lookupModel, delayMs: GENERATION_MS });
  process.send?.(server.url);
  process.on('disconnect', () => void server[Symbol.asyncDispose]().then(() => process.exit(0)));
} else {
  const child = fork(import.meta.filename, ['--server'], { execArgv: ['--import', 'tsx'] });
  const modelUrl = await new Promise<string>((resolve) => child.once('message', (u) => resolve(String(u))));
  const queue = `agent-bench:rollouts:${Math.random().toString(36).slice(2, 8)}`;
  const out = await mkdtemp(path.join(os.tmpdir(), 'rollouts-workers-bench-'));
  const controller = new AbortController();
  let ready!: (url: string) => void;
  const listening = new Promise<string>((r) => (ready = r));
  const served = serveEnv({ env: 'fixtures/lookup', split: 'train', listen: 0, out, maxSessions: 1_024, inferenceUrls: [modelUrl], workers: { store: STORE, queue }, onListening: ({ url }) => ready(url) }, controller.signal);
  const url = await listening;
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
  await new Promise((r) => ws.once('open', r));
  let ids = 0;
  const waiting = new Map<number, (m: { type: string; data: Record<string, unknown> }) => void>();
  ws.on('message', (raw) => {
    const m = JSON.parse(String(raw)) as { type: string; id?: number; data: Record<string, unknown> };
    if (m.type === 'rollout_group') solved += (m.data['records'] as { reward: number }[]).filter((r) => r.reward === 1).length;
    else if (m.id !== undefined && m.type !== 'rollouts_accepted') waiting.get(m.id)?.(m);
  });
  let solved = 0;
  const request = async (groups: number): Promise<number> => {
    const id = ++ids;
    solved = 0;
    const t0 = performance.now();
    const done = await new Promise<{ type: string; data: Record<string, unknown> }>((resolve) => {
      waiting.set(id, resolve);
      ws.send(JSON.stringify({ type: 'rollouts', id, data: { task_ids: Array.from({ length: 30 }, (_, i) => `lookup-train-${i}`), groups, n: K, model: 'fake-model', sampling: { temperature: 1, max_tokens: 128 }, concurrency: 512 } }));
    });
    if (done.type !== 'rollouts_done' || done.data['groups'] !== groups) throw new Error(JSON.stringify(done).slice(0, 400));
    if (solved < groups * K) throw new Error(`${groups * K - solved} of ${groups * K} episodes not solved: the fake model's turns did not parse`);
    return (groups * 1000) / (performance.now() - t0);
  };

  const workers: ResultPromise[] = [];
  const addWorker = async (): Promise<void> => {
    const w = execa('node', ['bin/agent.js', 'worker', '--store', STORE, '--queue', queue, '--concurrency', String(CONCURRENCY), '--json'], { reject: false });
    workers.push(w);
    await new Promise<void>((resolve) => w.stdout?.on('data', (chunk: Buffer) => String(chunk).includes('worker_started') && resolve()));
  };

  console.log(`rollouts on workers: ${GROUPS} groups × K = ${K} of the lookup suite, ${GENERATION_MS} ms generations (2 per episode), each worker ${CONCURRENCY} episodes at once`);
  const rates: number[] = [];
  for (const n of [1, 2]) {
    while (workers.length < n) await addWorker();
    await request(2); // warm-up: every worker joins the run and checks the model server
    const rate = await request(GROUPS);
    rates.push(rate);
    // An episode takes at least its two generations and its judge (200 ms): the bound for what is in flight.
    console.log(`  ${n} worker${n > 1 ? 's' : ' '}: ${rate.toFixed(2)} groups/s (${((rate * K * (2 * GENERATION_MS + 200)) / 1000 / (n * CONCURRENCY)).toFixed(2)} of the bound for ${n * CONCURRENCY} episodes in flight)`);
  }
  console.log(`  two workers / one: ${((rates[1] ?? 0) / (rates[0] ?? 1)).toFixed(2)}× (goal ≥ 1.8×)`);
  ws.close();
  for (const w of workers) w.kill('SIGTERM');
  await Promise.all(workers);
  controller.abort();
  await served;
  child.disconnect();
  const redis = new Redis(STORE);
  await redis.del(queue, `${queue}:workers`);
  redis.disconnect();
  await rm(out, { recursive: true, force: true });
}

/**
 * The overlapped training loop through `agent serve`'s rollouts, with a fake model: how much of a
 * trainer's step is spent waiting on rollouts. A fake vLLM server in another process takes 200 ms
 * per generation (concurrently, as vLLM batches); the lookup suite needs 2 per episode. A trainer
 * (a WebSocket client in this process) takes a fake update step (1 s, then 0.5 s) per batch, then
 * pushes its weights and declares the new version. Each batch is G groups of K = 8 episodes, all in
 * flight at once (64 or 256).
 * - **synchronous**: the next batch is asked for once the update is over (no overlap);
 * - **one step off, waiting**: the next batch rolls while the update runs, but the push waits for
 *   it to end (no episode spans two versions);
 * - **partial rollouts**: the next batch rolls while the update runs; the trainer pauses new
 *   completions, pushes, declares, resumes: the episodes in flight go on, their later turns on the
 *   new weights, each labelled (`staleness_from: "newest"`);
 * - **partial, 2 ahead**: the same with two batches asked for ahead of the one being trained on
 *   (`max_staleness` 2): what it takes when a batch rolls longer than an update.
 * Reported per mode, in the steady state (from the first batch, which fills the pipeline whatever
 * the overlap, to the last update): the share of the trainer's time it waited on rollouts, and
 * groups/s trained on.
 * The lookup judge takes 200 ms per answer; its source's default concurrency (16) would bound a
 * batch of 256 at 80 answers a second (3.2 s of judging alone), so it runs here as a judge on a
 * batching server would, 512 at once: what is measured is the runtime's overlap, not the suite's
 * judge.
 */
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { serveEnv } from '../src/internal.js';
import { lookupModel } from '../src/serve/rollouts-testing.js';

const GENERATION_MS = 200;
/** Update steps: one longer than a batch's rollout, and one shorter (a batch then rolls across more than one update). */
const UPDATES_MS = [1_000, 500] as const;
const K = 8;
const STEPS = 8;

if (process.argv[2] === '--server') {
  const { startFakeVllmServer } = await import('../src/llm/fake-vllm-server.js');
  let version = 0;
  const server = await startFakeVllmServer({ reply: lookupModel, delayMs: GENERATION_MS, weightVersion: () => version });
  process.on('message', (v) => (version = Number(v)));
  process.send?.(server.url);
  process.on('disconnect', () => void server[Symbol.asyncDispose]().then(() => process.exit(0)));
} else {
  const child = fork(import.meta.filename, ['--server'], { execArgv: ['--import', 'tsx'] });
  const modelUrl = await new Promise<string>((resolve) => child.once('message', (u) => resolve(String(u))));
  const out = await mkdtemp(path.join(os.tmpdir(), 'train-loop-bench-'));
  const controller = new AbortController();
  let ready!: (url: string) => void;
  const listening = new Promise<string>((r) => (ready = r));
  const served = serveEnv({ env: 'fixtures/lookup', split: 'train', listen: 0, out, maxSessions: 1_024, inferenceUrls: [modelUrl], rewardSources: { judge: { module: 'judge.ts', export: 'judge', concurrency: 512 } }, onListening: ({ url }) => ready(url) }, controller.signal);
  const url = await listening;

  type Message = { type: string; id?: number; data: Record<string, unknown> };
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
  await new Promise((r) => ws.once('open', r));
  let ids = 0;
  const waiting = new Map<number, { done: (m: Message) => void; groups: number }>();
  ws.on('message', (raw) => {
    const m = JSON.parse(String(raw)) as Message;
    const w = m.id === undefined ? undefined : waiting.get(m.id);
    if (!w) return;
    if (m.type === 'rollout_group') {
      w.groups++;
      // The fake model's turns must parse (a reply cut by max_tokens is no tool call): a bench of failed episodes measures nothing.
      const unsolved = (m.data['records'] as { reward: number }[]).filter((r) => r.reward !== 1).length;
      if (unsolved > 0) throw new Error(`${unsolved} episodes of a group not solved: the fake model's turns did not parse`);
    }
    else if (m.type !== 'rollouts_accepted') {
      waiting.delete(m.id as number);
      w.done(m);
    }
  });
  const request = (type: string, data: object = {}): Promise<Message> =>
    new Promise((done) => {
      const id = ++ids;
      waiting.set(id, { done, groups: 0 });
      ws.send(JSON.stringify({ type, id, data }));
    });
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
  let version = 0;
  const push = async (): Promise<void> => {
    version++;
    child.send(version);
    await request('weight_version', { version });
  };
  const batch = (groups: number): Promise<Message> => request('rollouts', { task_ids: Array.from({ length: 30 }, (_, i) => `lookup-train-${i}`), groups, n: K, model: 'fake-model', sampling: { temperature: 1, max_tokens: 128 }, concurrency: groups * K, max_staleness: 2, staleness_from: 'newest', stale: 'drop' });

  type Mode = 'synchronous' | 'one step off, waiting' | 'partial rollouts' | 'partial, 2 ahead';
  /**
   * STEPS updates of a trainer. The first batch is the pipeline filling (nothing to train on yet,
   * whatever the overlap): the figures are the steady state from its arrival to the last update's
   * end, and no batch is asked for beyond the last step.
   */
  const loop = async (mode: Mode, groups: number, updateMs: number): Promise<{ waitedShare: number; groupsPerS: number; dropped: number }> => {
    const lookahead = mode === 'synchronous' ? 0 : mode === 'partial, 2 ahead' ? 2 : 1;
    let waited = 0;
    let sent = 0;
    let dropped = 0;
    let asked = 0;
    let t0 = 0;
    const ahead: Promise<Message>[] = [];
    const ask = (): void => {
      ahead.push(batch(groups));
      asked++;
    };
    const refill = (): void => {
      while (ahead.length < lookahead && asked < STEPS) ask();
    };
    ask();
    refill();
    for (let step = 0; step < STEPS; step++) {
      if (ahead.length === 0) ask();
      const w = performance.now();
      const done = await (ahead.shift() as Promise<Message>);
      if (done.type !== 'rollouts_done') throw new Error(JSON.stringify(done).slice(0, 300));
      if (step === 0) t0 = performance.now();
      else {
        waited += performance.now() - w;
        sent += done.data['groups'] as number;
      }
      dropped += done.data['dropped'] as number;
      refill();
      await sleep(updateMs);
      if (mode === 'one step off, waiting' && ahead.length > 0) {
        // The push waits for the batch in flight: no episode spans two versions.
        const w2 = performance.now();
        await ahead[0];
        waited += performance.now() - w2;
        await push();
      } else if (mode === 'synchronous' || ahead.length === 0) await push();
      else {
        await request('pause');
        await push();
        await request('resume');
      }
    }
    const wall = performance.now() - t0;
    return { waitedShare: waited / wall, groupsPerS: (sent * 1000) / wall, dropped };
  };

  console.log(`the overlapped training loop through agent serve: ${GENERATION_MS} ms generations (2 per episode), K = ${K}, ${STEPS} steps`);
  await loop('partial rollouts', 2, UPDATES_MS[0]); // warm-up
  for (const updateMs of UPDATES_MS) {
    for (const inFlight of [64, 256]) {
      for (const mode of ['synchronous', 'one step off, waiting', 'partial rollouts', 'partial, 2 ahead'] as const) {
        const r = await loop(mode, inFlight / K, updateMs);
        console.log(`  ${updateMs} ms update, ${String(inFlight).padStart(3)} in flight, ${mode.padEnd(21)}: waited on rollouts ${(100 * r.waitedShare).toFixed(1)} % of the time, ${r.groupsPerS.toFixed(1)} groups/s${r.dropped > 0 ? `, ${r.dropped} groups dropped as stale` : ''}`);
      }
    }
  }
  ws.close();
  controller.abort();
  await served;
  child.disconnect();
  await rm(out, { recursive: true, force: true });
}

/**
 * What token-mode rollouts add on top of the inference server. A fake vLLM server
 * (src/llm/fake-vllm-server.ts) in a child process answers the lookup suite's turns; this process
 * runs `runBenchmark --tokens` against it, as a user would, at 1, 64 and 256 episodes in flight.
 * - With a server that answers at once: this process's CPU per generated turn (the rendering of
 *   the environment's messages, the completion request, parsing, the env step and the run folder),
 *   and the wall time per turn of one episode at a time (our latency, loopback HTTP included).
 * - With a server that takes 50 ms per generation (concurrently, as vLLM batches): the time an added
 *   round of episodes (one per slot) takes over the ideal (its 2 turns × 50 ms), from two runs of
 *   different sizes so that the run's fixed costs cancel: 1.0 means no turn waited on our side.
 */
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runBenchmark } from '../src/internal.js';
import { lookupModel } from '../src/serve/rollouts-testing.js';

const GENERATION_MS = 50;

if (process.argv[2] === '--server') {
  const { startFakeVllmServer } = await import('../src/llm/fake-vllm-server.js');
  const server = await startFakeVllmServer({ reply: lookupModel, delayMs: Number(process.argv[3]) });
  process.send?.(server.url);
  process.on('disconnect', () => void server[Symbol.asyncDispose]().then(() => process.exit(0)));
} else {
  const serve = (delayMs: number): Promise<{ url: string; stop: () => void }> =>
    new Promise((resolve) => {
      const child = fork(import.meta.filename, ['--server', String(delayMs)], { execArgv: ['--import', 'tsx'] });
      child.once('message', (url) => resolve({ url: String(url), stop: () => child.disconnect() }));
    });
  const out = await mkdtemp(path.join(os.tmpdir(), 'rollouts-bench-'));
  const run = async (url: string, concurrency: number, episodes: number): Promise<{ wallMs: number; cpuMs: number; turns: number; episodes: number }> => {
    const trials = Math.max(1, Math.ceil(episodes / 30));
    let cpu0 = process.cpuUsage();
    const t0 = performance.now();
    // The rollouts are the run: from its start to its last episode's end (the benchmark's scoring after it is not theirs).
    let started = t0;
    let ended = t0;
    let cpu = process.cpuUsage(cpu0);
    const report = await runBenchmark({
      suite: 'fixtures/lookup',
      split: 'train',
      trials,
      concurrency,
      policy: 'llm:fake-model',
      out,
      llm: { baseURL: url, tokens: true, maxTokens: 256 },
      onRun: (r) => {
        r.events.on('run_started', () => {
          started = performance.now();
          cpu0 = process.cpuUsage();
        });
        r.events.on('episode_finished', () => {
          ended = performance.now();
          cpu = process.cpuUsage(cpu0);
        });
      },
    });
    const wallMs = ended - started;
    const n = report.tasks.reduce((sum, t) => sum + t.trials.length, 0);
    return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000, turns: n * 2, episodes: n };
  };
  console.log('token-mode rollouts on fixtures/lookup (2 generated turns per episode), against a fake vLLM server in another process');
  const fast = await serve(0);
  await run(fast.url, 8, 30); // warm-up: module loading, JIT
  for (const c of [1, 64, 256]) {
    const r = await run(fast.url, c, c === 1 ? 30 : Math.max(c, 256));
    console.log(`  instant server, ${String(c).padStart(3)} in flight: ${(r.cpuMs / r.turns).toFixed(2)} ms CPU per turn, ${(r.cpuMs / r.episodes).toFixed(2)} ms per episode${c === 1 ? `, ${(r.wallMs / r.turns).toFixed(2)} ms wall per turn` : ''} (${r.episodes} episodes)`);
  }
  fast.stop();
  const slow = await serve(GENERATION_MS);
  for (const c of [1, 64, 256]) {
    // What is the same for any size (the first episode's start-up) cancels out between two sizes.
    const rounds = c === 1 ? [30, 90] : [2, 6];
    const [a, b] = [await run(slow.url, c, c * (rounds[0] as number)), await run(slow.url, c, c * (rounds[1] as number))];
    const ideal = (Math.ceil(b.episodes / c) - Math.ceil(a.episodes / c)) * 2 * GENERATION_MS;
    console.log(`  ${GENERATION_MS} ms generations, ${String(c).padStart(3)} in flight: ideal/actual ${(ideal / (b.wallMs - a.wallMs)).toFixed(2)} per added round of ${c} episodes (${a.episodes} episodes in ${(a.wallMs / 1000).toFixed(2)} s, ${b.episodes} in ${(b.wallMs / 1000).toFixed(2)} s)`);
  }
  slow.stop();
  await rm(out, { recursive: true, force: true });
}

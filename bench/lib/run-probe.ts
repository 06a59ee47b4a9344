/**
 * One cold `agent run` through the public API (bench/threads.bench.ts): argv N M THREADS [BURN_MS];
 * N episodes of M steps of a 20 ms tool, all in flight at once, into a run folder. Prints the ratio
 * to the ideal (M × 20 ms) timed from `execute()` (what a user waits: threads starting included)
 * and from the first step, the seconds, and the process's CPU per step (every thread's). With
 * BURN_MS, the tool burns that much CPU instead of waiting, 16 episodes in flight.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type * as Lib from '../../src/index.js';
import { writeSleepyEnv } from './sleepy-env.js';

const { Run } = (process.env['BENCH_BUILT'] === '1' ? await import('../../dist/src/index.js' as string) : await import('../../src/index.js')) as Pick<typeof Lib, 'Run'>;
const [n, m, threads, burnMs = 0] = process.argv.slice(2).map(Number) as [number, number, number, number?];
const LATENCY_MS = 20;
const dir = await mkdtemp(path.join(os.tmpdir(), 'agent-run-probe-'));
try {
  await writeSleepyEnv(dir);
  if (burnMs > 0) await writeFile(path.join(dir, 'tools.mjs'), `export const wait = () => { const t = performance.now(); while (performance.now() - t < ${burnMs}); return { observation: 'ok', rewards: { ok: 1 } }; };\nexport const now = wait;\n`);
  const policy = path.join(dir, 'policy.mjs');
  await writeFile(policy, `export default () => ({ name: 'wait', params: {} });\n`);
  const run = await Run.prepare({ env: dir, policy, episodes: n, concurrency: burnMs > 0 ? 16 : n, maxSteps: m, threads, out: path.join(dir, 'runs') });
  let first = 0;
  const off = run.events.on('dispatched', () => {
    first = performance.now();
    off();
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const summary = await run.execute();
  const end = performance.now();
  const cpu = process.cpuUsage(cpu0);
  if (summary.steps.total !== n * m) throw new Error(`expected ${n * m} steps, got ${summary.steps.total}`);
  const ideal = m * LATENCY_MS;
  console.log(JSON.stringify({ ratio: ideal / (end - t0), ratioFromFirstStep: ideal / (end - first), startMs: first - t0, seconds: (end - t0) / 1000, cpuUsPerStep: (cpu.user + cpu.system) / (n * m) }));
} finally {
  await rm(dir, { recursive: true, force: true });
}

/**
 * One cold `agent run` through the public API (bench/threads.bench.ts): argv ENV_DIR N M THREADS
 * [IN_FLIGHT]; N episodes of M steps of the env's `wait` tool, IN_FLIGHT at once (default all),
 * into a run folder. Prints the ratio to the ideal (M × 20 ms) timed from `execute()` (what a user
 * waits: threads starting included) and from the first step, the seconds, and the process's CPU per
 * step (every thread's).
 *
 * Plain JavaScript on the built package, run by plain `node`: worker threads inherit their
 * process's `--import` hooks, and under tsx each would load the package through tsx's loader,
 * ~0.3 s longer to start than a user's `agent run` (the built CLI) takes.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

const { Run } = await import(new URL('../../dist/src/index.js', import.meta.url).href);
const [envDir, ...numbers] = process.argv.slice(2);
const [n, m, threads, inFlight = n] = numbers.map(Number);
const LATENCY_MS = 20;
const dir = await mkdtemp(path.join(os.tmpdir(), 'agent-run-probe-'));
try {
  const policy = path.join(dir, 'policy.mjs');
  await writeFile(policy, `export default () => ({ name: 'wait', params: {} });\n`);
  const run = await Run.prepare({ env: envDir, policy, episodes: n, concurrency: inFlight, maxSteps: m, threads, out: path.join(dir, 'runs') });
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

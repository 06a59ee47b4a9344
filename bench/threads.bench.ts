/**
 * `agent run --threads`: a cold run through the public API (the built package, a fresh process per
 * figure, median of three), N episodes × M steps of a 20 ms tool all in flight, into a run folder,
 * in one thread and over two. The ratio is to the ideal M × 20 ms, timed from `execute()` (worker
 * threads starting included, as a user waits for them) and from the run's first step; CPU per step
 * is the whole process's, every thread's. Then a tool that burns 2 ms of CPU a step, where the
 * second core is what threads are for.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeSleepyEnv } from './lib/sleepy-env.js';
import { target } from './lib/targets.js';

if (!existsSync(path.join(import.meta.dirname, '..', 'dist', 'src', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` first');

const CASES: readonly { readonly n: number; readonly m: number; readonly goal: number }[] = [
  { n: 256, m: 10, goal: 0.95 },
  { n: 1024, m: 10, goal: 0.9 },
  { n: 4096, m: 5, goal: 0.6 },
];
// Plain node on the built package, as a user's `agent run` (see the probe's header).
const probe = path.join(import.meta.dirname, 'lib', 'run-probe.mjs');
const envs = await mkdtemp(path.join(os.tmpdir(), 'agent-threads-bench-'));
const sleepy = path.join(envs, 'sleepy');
const burning = path.join(envs, 'burning');
for (const dir of [sleepy, burning]) {
  await mkdir(dir);
  await writeSleepyEnv(dir);
}
// A tool that burns its 2 ms of CPU instead of waiting.
await writeFile(path.join(burning, 'tools.mjs'), `export const wait = () => { const t = performance.now(); while (performance.now() - t < 2); return { observation: 'ok', rewards: { ok: 1 } }; };\nexport const now = wait;\n`);

interface Probe {
  readonly seconds: number;
  readonly ratio: number;
  readonly ratioFromFirstStep: number;
  readonly startMs: number;
  readonly cpuUsPerStep: number;
}

/** `inFlight`: episodes at once (all of them unless given). */
function median(env: string, n: number, m: number, threads: number, inFlight = n): Probe {
  const runs = [0, 1, 2].map(() => JSON.parse(execFileSync(process.execPath, [probe, env, String(n), String(m), String(threads), String(inFlight)], { encoding: 'utf8' })) as Probe).sort((a, b) => a.seconds - b.seconds);
  return runs[1] as Probe;
}

const line = (p: Probe): string => `${p.ratio.toFixed(2)} of ideal (${p.ratioFromFirstStep.toFixed(2)} from the first step, ${Math.round(p.startMs)} ms to it), ${p.cpuUsPerStep.toFixed(0)} µs CPU/step`;
for (const { n, m, goal } of CASES) {
  const one = median(sleepy, n, m, 1);
  const two = median(sleepy, n, m, 2);
  console.log(`  N=${String(n).padEnd(5)} M=${String(m).padEnd(3)} 1 thread: ${line(one)}`);
  console.log(`  ${' '.repeat(13)} 2 threads: ${line(two)}   ${target(`agent run --threads 2, cold ${n} × ${m} of a 20 ms tool, of ideal`, two.ratio, '', { atLeast: goal })}`);
}
const burnOne = median(burning, 400, 10, 1, 16);
const burnTwo = median(burning, 400, 10, 2, 16);
const speedup = burnOne.seconds / burnTwo.seconds;
console.log(`  a 2 ms CPU tool, 400 × 10: ${burnOne.seconds.toFixed(2)} s in one thread, ${burnTwo.seconds.toFixed(2)} s over two (${speedup.toFixed(2)}×, the threads' start included)   ${target('agent run --threads 2, a 2 ms CPU tool, speed-up', speedup, '×', { atLeast: 1.5 })}`);
await rm(envs, { recursive: true, force: true });

/**
 * Cold and short: N agents each doing M steps of a 20 ms tool, in a fresh process, timed from the
 * first step with no warm-up — what a short `agent run` or a trainer's first batch sees — against
 * the ideal N / 20 ms. Each (N, M) runs in its own process (median of three), so no run inherits
 * another's JIT, compiled validators or grown heaps. CPU µs per step beside every rate. It runs
 * the built package (dist/, as users install it: `npm run build` first); the sources through tsx
 * cost about half as much CPU again per step (tsx's transform wraps every closure it creates).
 * Beside each line, the floor: the same awaits of the same timer in plain Node, no toolkit
 * (bench/lib/cold-floor.ts), which is what this machine allows at all.
 *
 * `--json` prints the figures as one JSON object (what `npm run bench -- --check` compares).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { target } from './lib/targets.js';

if (!existsSync(path.join(import.meta.dirname, '..', 'dist', 'src', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` first');

const CASES: readonly { readonly n: number; readonly m: number; readonly goal: number }[] = [
  { n: 256, m: 10, goal: 0.9 },
  { n: 1024, m: 10, goal: 0.8 },
  { n: 1024, m: 40, goal: 0.85 },
  { n: 4096, m: 5, goal: 0.5 },
];
const json = process.argv.includes('--json');
const probe = path.join(import.meta.dirname, 'lib', 'cold-probe.ts');
const floorProbe = path.join(import.meta.dirname, 'lib', 'cold-floor.ts');

interface Probe {
  readonly ratio: number;
  readonly stepsPerSecond: number;
  readonly cpuUsPerStep: number;
}

/** The median of three fresh processes, by ratio. */
function median(script: string, n: number, m: number): Probe {
  const runs = [0, 1, 2].map(() => JSON.parse(execFileSync(process.execPath, ['--import', 'tsx', script, String(n), String(m)], { encoding: 'utf8', env: { ...process.env, BENCH_BUILT: '1' } })) as Probe).sort((a, b) => a.ratio - b.ratio);
  return runs[1] as Probe;
}

const rows = CASES.map(({ n, m, goal }) => {
  const mid = median(probe, n, m);
  const floor = median(floorProbe, n, m);
  if (!json) {
    const ratioGoal = target(`cold ${n} agents × ${m} steps, of ideal`, mid.ratio, '', { atLeast: goal });
    console.log(`  N=${String(n).padEnd(5)} M=${String(m).padEnd(3)} ${mid.ratio.toFixed(2)} of ideal, ${Math.round(mid.stepsPerSecond).toLocaleString('en-US').padStart(7)} steps/s, ${mid.cpuUsPerStep.toFixed(1).padStart(5)} µs CPU/step   ${ratioGoal}   (plain Node: ${floor.ratio.toFixed(2)}, ${floor.cpuUsPerStep.toFixed(1)} µs)`);
    if (n === 4096) console.log(`  CPU per step at 4,096 agents: ${mid.cpuUsPerStep.toFixed(1)} µs   ${target('CPU per step at 4,096 agents (20 ms tool)', mid.cpuUsPerStep, 'µs', { atMost: 10 })}`);
  }
  return { n, m, goal, ...mid, floor: floor.ratio };
});
if (json) console.log(JSON.stringify({ cold: rows }));

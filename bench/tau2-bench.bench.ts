/**
 * τ²-bench, whole: every base task of each domain replayed through the env and compared with τ²'s
 * own Python (core/fidelity.ts: starts, observations, hashes, gold and do-nothing scores), then
 * `agent benchmark --policy gold` on the base split, timed per task. `npm test` checks a sample of
 * airline's and retail's tasks; this checks them all. Goals: no mismatch anywhere; gold scores what
 * τ²'s gold scores (mock 8 of 10, every other base task 1); ≤ 100 ms per gold task (a run's start included).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runBenchmark } from '../src/benchmark.js';
import { checkFidelity } from '../fixtures/tau2-bench/core/fidelity.js';
import { target } from './lib/targets.js';

const ROOT = path.resolve(import.meta.dirname, '..', 'fixtures', 'tau2-bench');
const GOLD: Readonly<Record<string, number>> = { mock: 8, airline: 50, retail: 114, telecom: 114 };
const out = await mkdtemp(path.join(os.tmpdir(), 'tau2-bench-'));
let mismatches = 0;
try {
  console.log('τ²-bench, every base task against τ²\'s own Python, then gold through agent benchmark:');
  for (const [domain, goldPasses] of Object.entries(GOLD)) {
    const t0 = performance.now();
    const found = await checkFidelity(path.join(ROOT, domain));
    const replayMs = performance.now() - t0;
    mismatches += found.mismatches.length + found.unpaired.length;
    for (const m of found.mismatches.slice(0, 3)) console.log(`    ${m.slice(0, 300)}`);
    const t1 = performance.now();
    const report = await runBenchmark({ suite: path.join(ROOT, domain), split: 'base', policy: 'gold', out: path.join(out, domain) });
    const msPerTask = (performance.now() - t1) / report.tasks.length;
    const passed = report.tasks.filter((t) => t.trials[0]?.success).length;
    console.log(
      `  ${domain.padEnd(8)} ${String(found.tasks).padStart(3)} tasks, ${String(found.actions).padStart(3)} gold actions: ${found.mismatches.length} mismatches (${(replayMs / found.tasks).toFixed(1)} ms a task); gold ${passed}/${report.tasks.length} (τ²'s gold: ${goldPasses}), ${msPerTask.toFixed(1)} ms a task`,
    );
    console.log(`    ${target(`tau2-bench ${domain}: gold tasks passed`, passed, '', { atLeast: goldPasses, atMost: goldPasses })}; ${target(`tau2-bench ${domain}: ms per gold task`, msPerTask, 'ms', { atMost: 100 })}`);
  }
  console.log(`  ${target('tau2-bench: mismatches with τ²\'s own Python, all domains', mismatches, '', { atMost: 0 })}`);
} finally {
  await rm(out, { recursive: true, force: true });
}

/**
 * Fuzz throughput: checked cases per second on the weather env with its latency scaled to zero,
 * every check on (the determinism re-run included). Target: ≥ 2,000 cases/s.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Fuzzer } from '../src/internal.js';

const json = process.argv.includes('--json');
const store = await mkdtemp(path.join(os.tmpdir(), 'agent-fuzz-bench-'));
const results: Record<string, number> = {};
try {
  for (const [name, env, toolOptions] of [
    ['weather', 'fixtures/weather', { latency_scale: 0 }],
    ['airline', 'fixtures/airline', {}],
  ] as const) {
    await using warm = await Fuzzer.prepare({ env, runs: 300, seed: 99, storeDir: store, toolOptions });
    await warm.run();
    await using f = await Fuzzer.prepare({ env, runs: 6_000, seed: 1, storeDir: store, toolOptions });
    const summary = await f.run();
    if (summary.failures.length > 0) throw new Error(`${name}: ${summary.failures.length} failures`);
    results[name] = summary.cases_per_second;
  }
} finally {
  await rm(store, { recursive: true, force: true });
}
if (json) console.log(JSON.stringify(results));
else {
  console.log('\nagent fuzz throughput, every check on (target ≥ 2,000 checked cases/s on weather)');
  for (const [name, rate] of Object.entries(results)) console.log(`  ${name.padEnd(8)} ${Math.round(rate).toLocaleString('en-US').padStart(6)} cases/s`);
}

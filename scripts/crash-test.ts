/**
 * The full crash test: `agent run` on the weather env, killed with SIGKILL 25 times at random
 * moments and resumed after each, then checked (see crash-harness.ts). Needs a Redis:
 *   tsx scripts/crash-test.ts [--kills 25] [--episodes 100] [--store redis://127.0.0.1:6379/0] [--idempotent]
 * `--idempotent` runs an env whose tool is declared idempotent (calls cut off are re-run, not TOOL_LOST).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { crashRun, idempotentWeather } from './crash-harness.js';

const { values } = parseArgs({
  options: {
    kills: { type: 'string', default: '25' },
    episodes: { type: 'string', default: '100' },
    store: { type: 'string', default: 'redis://127.0.0.1:6379/0' },
    seed: { type: 'string', default: '1' },
    idempotent: { type: 'boolean', default: false },
  },
});

const out = await mkdtemp(path.join(os.tmpdir(), 'crash-test-'));
let env = 'fixtures/weather';
if (values.idempotent) env = await idempotentWeather(out);
const started = performance.now();
const report = await crashRun({
  env,
  store: values.store,
  out: path.join(out, 'runs'),
  episodes: Number(values.episodes),
  concurrency: 4,
  kills: Number(values.kills),
  seed: Number(values.seed),
  killAfterMs: [150, 700],
  toolOptions: ['latency_scale=0.1'],
  log: (l) => console.log(l),
});
console.log(JSON.stringify({ ...report, seconds: Math.round((performance.now() - started) / 100) / 10 }, null, 2));
await rm(out, { recursive: true, force: true });
process.exitCode = report.problems.length === 0 && report.keysLeft === 0 && report.exitCode === 0 ? 0 : 1;


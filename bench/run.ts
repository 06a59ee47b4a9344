/**
 * `npm run bench`: every benchmark in turn, each in a process of its own.
 * `npm run bench -- --check`: only the figures CI guards (the cold-start lines), as JSON, failing
 * when one regressed by more than 20 % against `bench/baseline.json`; `-- --update` rewrites that
 * file from this machine's figures. Timings belong here, never in `npm test`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describeGoal, formatValue, type TargetRecord } from './lib/targets.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const BASELINE = path.join(ROOT, 'bench', 'baseline.json');
/** How much worse a guarded figure may get before --check fails. */
const TOLERANCE = 0.2;

function build(): void {
  const r = spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

const BENCHES: readonly (readonly string[])[] = [
  ['--import', 'tsx', 'bench/cold-start.bench.ts'],
  ['--import', 'tsx', 'bench/threads.bench.ts'],
  ['--import', 'tsx', 'bench/core.bench.ts'],
  ['--import', 'tsx', 'bench/object-shapes.bench.ts'],
  ['--import', 'tsx', 'bench/commit.bench.ts'],
  ['--import', 'tsx', 'bench/graph-loop.bench.ts'],
  ['--expose-gc', '--import', 'tsx', 'bench/rewards.bench.ts'],
  ['--import', 'tsx', 'bench/redis-store.bench.ts'],
  ['--import', 'tsx', 'bench/durable-run.bench.ts'],
  ['--import', 'tsx', 'bench/debug.bench.tsx'],
  ['--import', 'tsx', 'bench/web-console.bench.ts'],
  ['--import', 'tsx', 'bench/mcp.bench.ts'],
  ['--import', 'tsx', 'bench/distributed.bench.ts'],
  ['--import', 'tsx', 'bench/schema-diff.bench.ts'],
  ['--import', 'tsx', 'bench/fuzz.bench.ts'],
  ['--import', 'tsx', 'bench/interrupt.bench.ts'],
  ['--import', 'tsx', 'bench/serve.bench.ts'],
  ['--import', 'tsx', 'bench/serve-memory.bench.ts'],
  ['--import', 'tsx', 'bench/openenv.bench.ts'],
  ['--import', 'tsx', 'bench/rollouts.bench.ts'],
  ['--import', 'tsx', 'bench/train-loop.bench.ts'],
  ['--import', 'tsx', 'bench/rollouts-workers.bench.ts'],
  ['--import', 'tsx', 'bench/capture.bench.ts'],
  ['--import', 'tsx', 'bench/sandbox.bench.ts'],
  ['--import', 'tsx', 'bench/tau2-bench.bench.ts'],
  ['--import', 'tsx', 'bench/package.bench.ts'],
];

interface ColdRow {
  readonly n: number;
  readonly m: number;
  readonly ratio: number;
  readonly cpuUsPerStep: number;
}

function cold(): ColdRow[] {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'bench/cold-start.bench.ts', '--json'], { cwd: ROOT, encoding: 'utf8' });
  return (JSON.parse(out.trim().split('\n').pop() as string) as { cold: ColdRow[] }).cold;
}

// The cold-start and package benchmarks run the built package, as users get it.
build();
if (process.argv.includes('--check') || process.argv.includes('--update')) {
  const now = cold();
  if (process.argv.includes('--update')) {
    writeFileSync(BASELINE, `${JSON.stringify({ cold: now.map(({ n, m, ratio, cpuUsPerStep }) => ({ n, m, ratio, cpuUsPerStep })) }, null, 2)}\n`);
    console.log(`bench: wrote ${path.relative(ROOT, BASELINE)}`);
  } else {
    const base = (JSON.parse(readFileSync(BASELINE, 'utf8')) as { cold: ColdRow[] }).cold;
    const problems: string[] = [];
    for (const b of base) {
      const r = now.find((x) => x.n === b.n && x.m === b.m);
      const name = `cold N=${b.n} M=${b.m}`;
      if (!r) problems.push(`${name}: not measured`);
      else {
        const line = `${name}: ${r.ratio.toFixed(2)} of ideal (baseline ${b.ratio.toFixed(2)}), ${r.cpuUsPerStep.toFixed(1)} µs CPU/step (baseline ${b.cpuUsPerStep.toFixed(1)})`;
        const bad = r.ratio < b.ratio * (1 - TOLERANCE) || r.cpuUsPerStep > b.cpuUsPerStep * (1 + TOLERANCE);
        console.log(`${bad ? '✗' : '✓'} ${line}`);
        if (bad) problems.push(line);
      }
    }
    if (problems.length > 0) {
      console.error(`bench --check: ${problems.length} figure(s) regressed by more than ${TOLERANCE * 100} %:\n${problems.map((p) => `  ${p}`).join('\n')}`);
      process.exitCode = 1;
    }
  }
} else {
  // Every benchmark records its targets here (bench/lib/targets.ts); the run closes with all of them.
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'agent-bench-'));
  const file = path.join(tmp, 'targets.jsonl');
  try {
    for (const args of BENCHES) {
      console.log(`\n── ${args[args.length - 1]}`);
      const r = spawnSync(process.execPath, args, { cwd: ROOT, stdio: 'inherit', env: { ...process.env, BENCH_TARGETS: file } });
      if (r.status !== 0) process.exit(r.status ?? 1);
    }
    const targets = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as TargetRecord) : [];
    const width = Math.max(...targets.map((t) => t.name.length));
    console.log(`\n── targets: ${targets.filter((t) => t.met).length} of ${targets.length} met`);
    for (const t of targets) console.log(`  ${t.met ? '✓' : '✗'} ${t.name.padEnd(width)}  ${formatValue(t.value, t.unit).padStart(16)}   goal ${describeGoal(t.goal, t.unit)}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

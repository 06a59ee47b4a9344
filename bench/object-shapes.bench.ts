/**
 * `npm run bench`: what a spread followed by keys costs on the step path (Node 20's V8 gives every
 * `{ ...x, key }` a hidden class of its own once the literal has been run a few times), and a check
 * that a run's per-step records no longer get one.
 *
 * 1. 200,000 settled-step events given `available_actions` by a spread or by Object.assign, each
 *    read as the run's listeners read it (ten fields) and serialized: CPU per event.
 * 2. `agent run fixtures/weather --episodes 300` with bench/lib/hidden-classes.mjs preloaded: the
 *    objects the run serialized (events, records, replies) that had a hidden class of their own.
 *    Goal: none among the per-step ones.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

const settled = (i: number): Record<string, unknown> => ({ type: 'trace_settled', time: Date.now() + 0.25, instance_id: `ep-${i}`, episode: i, trace_id: `tr-${i}`, step: 1, action: 'get_weather', params: { city: 'Paris' }, status: 'resolved', observation: { temp: 21 }, reward: 0, rewards: {}, done: false, seq_before: 0, seq: 1, duration_ms: 0.123 });
const offered = ['get_weather'];
const bySpread = (e: Record<string, unknown>): Record<string, unknown> => ({ ...e, available_actions: offered });
const byAssign = (e: Record<string, unknown>): Record<string, unknown> => Object.assign({}, e, { available_actions: offered });

let sink = 0;
function read(e: Record<string, unknown>): void {
  sink += (e['episode'] as number) + (e['step'] as number) + (e['seq'] as number) + (e['duration_ms'] as number) + (e['done'] ? 1 : 0);
  sink += (e['type'] as string).length + (e['trace_id'] as string).length + (e['action'] as string).length + (e['instance_id'] as string).length + (e['status'] === 'resolved' ? 1 : 0);
  sink += JSON.stringify(e).length;
}

function usPerEvent(make: (e: Record<string, unknown>) => Record<string, unknown>, n: number): number {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) read(make(settled(i)));
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

const N = 200_000;
usPerEvent(bySpread, 20_000);
usPerEvent(byAssign, 20_000);
const spread: number[] = [];
const assign: number[] = [];
for (let round = 0; round < 3; round++) {
  spread.push(usPerEvent(bySpread, N));
  assign.push(usPerEvent(byAssign, N));
}
const best = (xs: number[]): string => Math.min(...xs).toFixed(2);
console.log(`a settled event given a key and read by a listener: ${best(spread)} µs of CPU by a spread, ${best(assign)} by Object.assign (best of 3 × ${N.toLocaleString('en')}; ${sink > 0 ? 'checked' : ''})`);

const dir = mkdtempSync(path.join(os.tmpdir(), 'object-shapes-bench-'));
try {
  const out = path.join(dir, 'classes.json');
  execFileSync(process.execPath, ['--allow-natives-syntax', '--import', path.join(ROOT, 'bench/lib/hidden-classes.mjs'), path.join(ROOT, 'dist/bin/agent.js'), 'run', 'fixtures/weather', '--episodes', '300', '--out', path.join(dir, 'runs')], { cwd: ROOT, env: { ...process.env, HIDDEN_CLASSES_OUT: out }, stdio: 'ignore' });
  const rows = JSON.parse(readFileSync(out, 'utf8')) as { keys: string; objects: number; own_class: number }[];
  const objects = rows.reduce((n, r) => n + r.objects, 0);
  const own = rows.filter((r) => r.own_class > 0);
  console.log(`agent run fixtures/weather, 300 episodes: ${objects.toLocaleString('en')} objects serialized, ${own.reduce((n, r) => n + r.own_class, 0)} with a hidden class of their own${own.length ? `: ${own.slice(0, 4).map((r) => `${r.own_class}/${r.objects} ${r.keys.slice(0, 80)}`).join('; ')}` : ''} (goal: none on the per-step records)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

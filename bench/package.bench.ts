/**
 * The package as users run it (built JavaScript in dist/, so run `npm run build` first):
 * `agent --help` start-up against `node -e 0`, and the memory a trainer pays for importing the core.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'dist/bin/agent.js');
if (!existsSync(BIN)) throw new Error('dist/ is missing: run `npm run build` first');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

function timeMs(args: string[], runs = 15): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    execFileSync(process.execPath, args, { stdio: 'ignore' });
    times.push(performance.now() - t0);
  }
  return median(times);
}

const bare = timeMs(['-e', '0']);
const help = timeMs([BIN, '--help']);
console.log(`node -e 0:      ${bare.toFixed(0)} ms (median of 15)`);
console.log(`agent --help:   ${help.toFixed(0)} ms (median of 15) = ${(help / bare).toFixed(1)}× node -e 0 (target ≤ 8×)`);

const rss = (entry: string): number =>
  Number(execFileSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(entry)}); console.log(process.memoryUsage().rss)`], { encoding: 'utf8' }).trim()) / 1e6;
const base = Number(execFileSync(process.execPath, ['-e', 'console.log(process.memoryUsage().rss)'], { encoding: 'utf8' }).trim()) / 1e6;
console.log(`RSS, bare node: ${base.toFixed(0)} MB`);
console.log(`RSS after importing the core: ${rss(path.join(ROOT, 'dist/src/index.js')).toFixed(0)} MB; with the ui entry too: ${rss(path.join(ROOT, 'dist/src/ui/index.js')).toFixed(0)} MB`);

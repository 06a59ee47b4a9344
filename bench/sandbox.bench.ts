/**
 * What the sandbox adds to a command: `true` run start to exit inside it (bubblewrap, its cgroup
 * made, joined and swept, the resource limits set) against `true` spawned plainly, 1, 16 and 64 at
 * once. Goals: ≤ 15 ms p50 overhead, 64 at once without a failure.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseAllowedHost } from '../src/sandbox/egress.js';
import { Sandbox } from '../src/sandbox/sandbox.js';
import { target } from './lib/targets.js';

const ROUNDS = 8;
const percentile = (xs: readonly number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? NaN;

const plain = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now();
    spawn('true', { stdio: 'ignore' }).once('error', reject).once('close', () => resolve(performance.now() - t0));
  });

const sandbox = await Sandbox.open();
const workspace = await mkdtemp(path.join(os.tmpdir(), 'sandbox-bench-'));
const boxed = async (): Promise<{ ms: number; ok: boolean }> => {
  // The whole call: the cgroup made and swept too, not only the command's own duration_ms.
  const t0 = performance.now();
  const r = await sandbox.run({ argv: ['true'], workspace });
  return { ms: performance.now() - t0, ok: r.exit_code === 0 };
};

console.log(`The sandbox's start-to-exit overhead (${sandbox.mechanism.bwrap ?? 'no bwrap'}, limits by ${sandbox.mechanism.limits}; \`true\`, ${ROUNDS} rounds a level):`);
for (let i = 0; i < 4; i++) await Promise.all([plain(), boxed()]);
try {
  for (const n of [1, 16, 64]) {
    const outside: number[] = [];
    const inside: number[] = [];
    let failures = 0;
    for (let r = 0; r < ROUNDS; r++) {
      outside.push(...(await Promise.all(Array.from({ length: n }, plain))));
      for (const b of await Promise.all(Array.from({ length: n }, boxed))) {
        inside.push(b.ms);
        if (!b.ok) failures++;
      }
    }
    const overhead = percentile(inside, 0.5) - percentile(outside, 0.5);
    console.log(`  ${String(n).padStart(2)} at once: inside p50 ${percentile(inside, 0.5).toFixed(1)} / p99 ${percentile(inside, 0.99).toFixed(1)} ms, outside p50 ${percentile(outside, 0.5).toFixed(1)} / p99 ${percentile(outside, 0.99).toFixed(1)} ms: overhead p50 ${overhead.toFixed(1)} ms; ${failures} failure(s)`);
    if (n === 1) console.log(`    ${target('sandbox: start-to-exit overhead p50, one at a time', overhead, 'ms', { atMost: 15 })}`);
    if (n === 64) console.log(`    ${target('sandbox: failures with 64 at once', failures, '', { atMost: 0 })}`);
  }
  // With allowed hosts, each command also starts in a network namespace of its own with a forwarder (a Node) in front.
  await using egress = await Sandbox.open({ allowHosts: [parseAllowedHost('pypi.org')] });
  const times: number[] = [];
  for (let r = 0; r < ROUNDS * 4; r++) {
    const t0 = performance.now();
    await egress.run({ argv: ['true'], workspace });
    times.push(performance.now() - t0);
  }
  console.log(`  with an allowed host, one at a time: p50 ${percentile(times, 0.5).toFixed(1)} / p99 ${percentile(times, 0.99).toFixed(1)} ms`);
} finally {
  await rm(workspace, { recursive: true, force: true });
}

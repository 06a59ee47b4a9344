/**
 * Ctrl-C at scale: `agent run` with 10,000 calls in flight, of an in-process tool that ignores
 * its AbortSignal and of a subprocess tool (one `sleep` process per call), sent SIGINT once every
 * call is in flight; reports how long the process took to exit, whether summary.json was written,
 * and how many of the tool's processes were left (the goal: ≤ 2 s, complete, 0).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';

const CALLS = Number(process.env['CALLS'] ?? 10_000);
const root = await mkdtemp(path.join(os.tmpdir(), 'interrupt-bench-'));
const marker = `59.${process.pid}`;
/** How long a case may take to get every call in flight. */
const READY_WITHIN_MS = 90_000;

const alive = (): number => {
  try {
    return Number(execFileSync('pgrep', ['-c', '-f', `sleep ${marker}`], { encoding: 'utf8' }));
  } catch {
    return 0;
  }
};

async function env(name: string, spec: Record<string, unknown>, tools?: string): Promise<string> {
  const dir = path.join(root, name);
  await execa('mkdir', ['-p', dir]);
  await writeFile(path.join(dir, 'env.json'), JSON.stringify({ state: { type: 'object' }, actions: [{ name: 'wait', parameters: { type: 'object' } }], initial_states: [{}], tool_defaults: { timeout_ms: 300_000 }, ...spec }));
  if (tools) await writeFile(path.join(dir, 'tools.mjs'), tools);
  return dir;
}

/** Starts the run, waits until its live view reports every call in flight (and `ready` says so), then sends SIGINT. */
async function measure(label: string, dir: string, ready: () => boolean = () => true): Promise<void> {
  const out = path.join(root, `${label.replace(/\W+/g, '-')}-runs`);
  const child = execa('node', ['bin/agent.js', 'run', dir, '--episodes', String(CALLS), '--concurrency', String(CALLS), '--max-steps', '1', '--out', out], { reject: false });
  let lines = '';
  child.stderr?.on('data', (c: Buffer) => (lines += c.toString()));
  let exited: string | undefined;
  void child.then((r) => (exited = `the run ended by itself (exit ${r.exitCode ?? r.signal}): ${lines.trim().split('\n').at(-1)?.slice(0, 200) ?? ''}`));
  // A machine that starts processes slowly may never hold that many at once (each call ends after
  // 59 s): say so and go on, rather than wait forever.
  const deadline = performance.now() + READY_WITHIN_MS;
  while (!(lines.includes(` ${CALLS} in flight`) && ready())) {
    if (exited || performance.now() > deadline) {
      const why = exited ?? `not ready in ${READY_WITHIN_MS / 1000} s, with ${alive()} of the tool's processes running (this machine starts them too slowly to hold that many at once)`;
      child.kill('SIGKILL');
      await child;
      console.log(`${label.padEnd(36)} not measured: ${why}`);
      if (alive() > 0) execFileSync('pkill', ['-9', '-f', `sleep ${marker}`]);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const t0 = performance.now();
  child.kill('SIGINT');
  const result = await child;
  const seconds = (performance.now() - t0) / 1000;
  const [runId] = existsSync(out) ? await readdir(out) : [];
  const summary = runId !== undefined && existsSync(path.join(out, runId, 'summary.json'));
  console.log(`${label.padEnd(36)} exit ${result.exitCode ?? result.signal} in ${seconds.toFixed(2)} s after SIGINT · summary.json ${summary ? 'written' : 'MISSING'} · processes left ${alive()}`);
  if (alive() > 0) execFileSync('pkill', ['-9', '-f', `sleep ${marker}`]);
}

try {
  const inProcess = await env('in-process', { module: 'tools.mjs' }, 'export async function wait() { await new Promise((r) => setTimeout(r, 120_000)); return { observation: null }; }\n');
  await measure(`${CALLS} in-process calls (signal ignored)`, inProcess);
  const subprocess = await env('subprocess', { tools: { wait: { command: ['sleep', marker] } } });
  // While processes are still being started (the case that used to take a minute), and once they all run.
  await measure(`${CALLS} subprocess calls, starting`, subprocess, () => alive() >= CALLS / 10);
  await measure(`${CALLS} subprocess calls, all started`, subprocess, () => alive() >= Math.min(CALLS, 6_000));
} finally {
  await rm(root, { recursive: true, force: true });
}

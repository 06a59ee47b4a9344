/** Test helpers for commands: run `agent …` in-process with captured output, and scratch folders. */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { execa } from 'execa';
import type { Io } from './io.js';
import { main } from './main.js';

export async function runAgent(args: string[], isTTY = false): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (c: Buffer) => (stdout += c.toString()));
  err.on('data', (c: Buffer) => (stderr += c.toString()));
  const io: Io = { stdout: Object.assign(out, { isTTY }), stderr: err, exitCode: 0 };
  const code = await main(args, io);
  return { code, stdout, stderr };
}

/** Temporary folders, removed by `cleanup()` (call it in afterAll). */
export function scratch(): { dir(prefix: string): Promise<string>; cleanup(): Promise<void> } {
  const made: string[] = [];
  return {
    async dir(prefix) {
      const d = await mkdtemp(path.join(os.tmpdir(), prefix));
      made.push(d);
      return d;
    },
    async cleanup() {
      for (const d of made.splice(0)) await rm(d, { recursive: true, force: true });
    },
  };
}

/** The summary.json of the one run written under `out`. */
export async function readRunSummary(out: string): Promise<{ status: string; episodes: { finished: number } }> {
  const [runId] = await readdir(out);
  return JSON.parse(await readFile(path.join(out, runId as string, 'summary.json'), 'utf8')) as { status: string; episodes: { finished: number } };
}

/** `agent run …` as a child process, sent Ctrl-C once its first episode has finished. */
export async function interruptAfterFirstEpisode(args: string[]): Promise<{ exitCode: number | undefined; stderr: string }> {
  const child = execa('node', ['bin/agent.js', 'run', ...args], { reject: false });
  await new Promise<void>((resolve) => child.stderr?.on('data', (c: Buffer) => c.toString().includes('] episode') && resolve()));
  child.kill('SIGINT');
  const result = await child;
  return { exitCode: result.exitCode, stderr: String(result.stderr) };
}

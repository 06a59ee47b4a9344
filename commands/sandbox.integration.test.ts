/** `agent sandbox run` as a user meets it: the command's own exit code and output, 124 at the time limit, the result as JSON, a kept workspace. Needs bubblewrap (in CI its absence fails). */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { bwrapForTests } from '../src/sandbox/bwrap-testing.js';
import { runAgent, scratch } from './testing.js';

const available = bwrapForTests('agent sandbox run');

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe.skipIf(!available)('agent sandbox run', () => {
  it("passes the command's output and exit code through, and writes into the workspace it is given", async () => {
    const ws = await tmp.dir('sandbox-ws-');
    const r = await runAgent(['sandbox', 'run', '--workspace', ws, '--', 'sh', '-c', 'echo out; echo err >&2; echo kept > note.txt; exit 3']);
    expect(r).toMatchObject({ code: 3, stdout: 'out\n', stderr: 'err\n' });
    expect(await readFile(path.join(ws, 'note.txt'), 'utf8')).toBe('kept\n');
  });

  it('exits 124 at the time limit saying so, and prints the observation with --json', async () => {
    const slow = await runAgent(['sandbox', 'run', '--timeout', '300ms', '--', 'sh', '-c', 'while :; do :; done']);
    expect(slow.code).toBe(124);
    expect(slow.stderr).toContain('killed at the time limit');
    const oom = await runAgent(['sandbox', 'run', '--json', '--memory-mb', '64', '--', 'python3', '-c', 'b = bytearray(10**9)']);
    expect(oom.code).toBe(137);
    expect(JSON.parse(oom.stdout)).toMatchObject({ exit_code: null, signal: 'SIGKILL', oom: true, timed_out: false, truncated: false, mechanism: { mode: 'isolated' } });
  });

  it('Ctrl-C kills the sandbox and everything in it, exit 130', async () => {
    const ws = await tmp.dir('sandbox-ws-');
    const marker = `sleep 989.${process.pid}`;
    const child = execa(process.execPath, ['--import', 'tsx', path.resolve('bin/agent.ts'), 'sandbox', 'run', '--workspace', ws, '--', 'sh', '-c', `${marker} & touch started; while :; do :; done`], { reject: false });
    await vi.waitFor(() => expect(existsSync(path.join(ws, 'started'))).toBe(true), { timeout: 20_000, interval: 20 });
    child.kill('SIGINT');
    const result = await child;
    expect(result.exitCode, result.stderr).toBe(130);
    expect(result.stderr).toContain('interrupted; the command and everything it started were killed');
    await expect(execa('pgrep', ['-f', marker], { reject: false })).resolves.toMatchObject({ exitCode: 1 });
  });
});

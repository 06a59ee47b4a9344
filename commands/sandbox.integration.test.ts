/** `agent sandbox run` as a user meets it: the command's own exit code and output, 124 at the time limit, the result as JSON, a kept workspace. Needs bubblewrap (in CI its absence fails). */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { bwrapForTests } from '../src/sandbox/bwrap-testing.js';
import { Run, type Action, type Policy } from '../src/internal.js';
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

describe.skipIf(!available)('a run of an env with a sandbox', () => {
  it("agent debug shows a sandbox call's stdout, stderr and the files it changed; run.json how it was isolated", async () => {
    const out = await tmp.dir('sandbox-run-');
    const actions: Action[] = [
        { name: 'run_python', params: { code: "import os; os.remove('test_public.py'); open('new.txt', 'w').write('x'); print('hi'); raise SystemExit('bye')" } },
      { name: 'write_file', params: { path: 'stats_utils.py', content: 'median = None\n' } },
    ];
    const script: Policy = (obs) => actions[obs.step] ?? null;
    const run = await Run.prepare({ env: 'code/python-repair', episodes: 1, out, policy: script });
    await run.execute();
    const dir = run.dir as string;
    const manifest = JSON.parse(await readFile(path.join(dir, 'run.json'), 'utf8')) as { config: { sandbox: object } };
    expect(manifest.config.sandbox).toMatchObject({ mode: 'isolated', limits: expect.stringMatching(/^(cgroup-v1|cgroup-v2|uid-rlimit)$/) as unknown });

    const first = await runAgent(['debug', dir, '--trace', 'ep-0:1']);
    expect(first.stdout).toContain('  command: exit 1 in ');
    expect(first.stdout).toContain('  stdout:\n    | hi\n  stderr:\n    | bye\n');
    // The first listing of the episode: everything in the workspace is new to it.
    expect(first.stdout).toContain('  files: +new.txt  +stats_utils.py\n');
    const second = JSON.parse((await runAgent(['debug', dir, '--trace', 'ep-0:2', '--json'])).stdout) as { files: object; observation: unknown };
    expect(second).toMatchObject({ files: { added: [], changed: ['stats_utils.py'], removed: [] }, observation: 'wrote 14 bytes to stats_utils.py' });
  });
});

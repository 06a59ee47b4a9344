/** `agent run` as a careless user and a hostile tool would try it: bad --out, Ctrl-C on a busy loop, runs that cannot work. */
import { access, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { interruptAfterFirstEpisode, readRunSummary, runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

async function env(tools: string, extra: Record<string, unknown> = {}): Promise<string> {
  const dir = await tmp.dir('agent-env-');
  const files: Record<string, unknown> = {
    'env.json': { state: { type: 'object', required: ['n'], properties: { n: { type: 'integer', minimum: 0 } } }, actions: [{ name: 'bump', parameters: { type: 'object' } }], initial_states: [{ n: 0 }], module: 'tools.mjs', ...extra },
  };
  for (const [name, value] of Object.entries(files)) await writeFile(path.join(dir, name), JSON.stringify(value));
  await writeFile(path.join(dir, 'tools.mjs'), tools);
  return dir;
}

describe('agent run --out', () => {
  it.each([
    ['a file in the path', async (d: string) => (await writeFile(path.join(d, 'file'), ''), path.join(d, 'file', 'runs')), /ENOTDIR.*\nhint: .*a part of that path is a file/],
    ['a special file', async () => '/dev/null', /ENOTDIR/],
    ['a read-only place', async () => '/proc/agent-runs', /cannot create the run folder '\/proc\/agent-runs\/.*': (ENOENT|EACCES|EPERM)/],
  ])('with %s exits 2 at once with a message, writing nothing', async (_name, make, message) => {
    const out = await make(await tmp.dir('agent-out-'));
    const { code, stderr } = await runAgent(['run', 'fixtures/weather', '--episodes', '1', '--out', out]);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).not.toMatch(/internal error/);
  });
});

describe('agent run exits 1 with one line when the run could not work', () => {
  it('every step failed', async () => {
    const dir = await env(`export const bump = () => ({ patch: [{ op: 'replace', path: '/n', value: -5 }] });`);
    const { code, stdout, stderr } = await runAgent(['run', dir, '--episodes', '2', '--max-steps', '2', '--out', await tmp.dir('agent-runs-')]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^error: every step failed \(4 of 4; STATE_INVALID ×4: .*\/n: must be >= 0/m);
    // The cause is in every warning line, not only its first line.
    expect(stderr).toMatch(/warning: ep-0:1 STATE_INVALID: tool 'bump' returned a patch that makes the state invalid \(nothing was written\): \/n: must be >= 0/);
    expect(stdout).toMatch(/tool bump: 4 calls, 4 failed \(STATE_INVALID×4\)/);
  });

  it('no action was ever enabled', async () => {
    const dir = await env(`export const bump = () => ({});`, { tools: { bump: { enabled_if: 'n > 3' } } });
    const { code, stderr } = await runAgent(['run', dir, '--episodes', '2', '--out', await tmp.dir('agent-runs-')]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^error: no action was ever enabled/m);
  });
});

describe('Ctrl-C', () => {
  it('stops a CPU-only run (tau-bench airline, no latency) promptly, with its folder flushed', async () => {
    const out = await tmp.dir('agent-runs-');
    const result = await interruptAfterFirstEpisode(['fixtures/airline', '--episodes', '100000', '--concurrency', '16', '--out', out]);
    expect(result.exitCode).toBe(130);
    expect(result.stderr).toContain('Ctrl-C again to exit at once');
    const summary = await readRunSummary(out);
    expect(summary.status).toBe('interrupted');
    expect(summary.episodes.finished).toBeLessThan(100_000);
  });

  it('a second Ctrl-C exits at once, while the first is still closing tools down', async () => {
    const dir = await tmp.dir('agent-env-');
    await mkdir(dir, { recursive: true });
    // `warm` answers and then, once its stdin closes, lingers: closing the run waits a second for it
    // before killing it, so the second Ctrl-C lands while the first is still closing tools down
    // however slow the machine. `stall` holds the step in flight when the first Ctrl-C comes.
    await writeFile(path.join(dir, 'warm.py'), 'import sys, time\nfor line in sys.stdin:\n    print(\'{"patch": [{"op": "replace", "path": "/n", "value": 1}]}\', flush=True)\ntime.sleep(60)\n');
    await writeFile(path.join(dir, 'stall.py'), 'import sys, time\nfor line in sys.stdin:\n    open("in-flight", "w").close()\n    time.sleep(60)\n');
    const tools = { warm: { command: ['python3', 'warm.py'], persistent: true, enabled_if: 'n == 0' }, stall: { command: ['python3', 'stall.py'], persistent: true, enabled_if: 'n == 1' } };
    const state = { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } };
    const actions = [{ name: 'warm', parameters: { type: 'object' } }, { name: 'stall', parameters: { type: 'object' } }];
    await writeFile(path.join(dir, 'env.json'), JSON.stringify({ state, actions, initial_states: [{ n: 0 }], tools }));
    const child = execa('node', ['bin/agent.js', 'run', dir, '--episodes', '1', '--out', await tmp.dir('agent-runs-')], { reject: false });
    await vi.waitFor(() => access(path.join(dir, 'in-flight')), { timeout: 30_000, interval: 20 });
    child.kill('SIGINT');
    await new Promise<void>((resolve) => child.stderr?.on('data', (c: Buffer) => c.toString().includes('interrupted') && resolve()));
    child.kill('SIGINT');
    const result = await child;
    expect(result.stderr).toContain('exiting at once');
    expect(result.signal === 'SIGINT' || result.exitCode === 130).toBe(true);
  });
});

describe('a policy module that throws', () => {
  it("is named by file, line and column in the run's error (ctx.rng is an object, not a function)", async () => {
    const dir = await tmp.dir('agent-policy-');
    const file = path.join(dir, 'policy.mts');
    await writeFile(file, "export default (obs: { actions: { name: string }[] }, ctx: { rng: unknown }) => {\n  const roll = (ctx.rng as () => number)();\n  return { name: obs.actions[0]?.name ?? 'none', params: { roll } };\n};\n");
    // As a user runs it (vitest's own module loader would not map the module's lines).
    const r = await execa('node', ['bin/agent.js', 'run', 'fixtures/weather', '--episodes', '1', '--policy', file, '--out', await tmp.dir('agent-runs-')], { reject: false });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/error: every episode ended in a policy error: the policy threw: TypeError: ctx\.rng is not a function \(at .*policy\.mts:2:\d+\)/);
  });
});

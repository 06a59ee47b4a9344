/**
 * Ctrl-C ends any run and leaves nothing behind: hundreds of subprocess calls in flight (their
 * starts queued, not forked all at once), once or twice. Counts and outcomes are asserted, never
 * how long it took (see `npm run bench` for the figures at 10,000 calls).
 */
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { readRunSummary, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

/** Processes whose command line holds `marker`. */
function alive(marker: string): number {
  try {
    return Number(execFileSync('pgrep', ['-c', '-f', marker], { encoding: 'utf8' }).trim());
  } catch {
    return 0; // pgrep exits 1 when nothing matches
  }
}

/** An env whose one tool is a process that sleeps a minute, under a duration no other process has. */
async function sleepyEnv(): Promise<{ dir: string; marker: string }> {
  const dir = await tmp.dir('agent-sleepy-');
  const marker = `61.${process.pid}${Math.floor(Math.random() * 1e6)}`;
  await writeFile(path.join(dir, 'env.json'), JSON.stringify({ state: { type: 'object' }, actions: [{ name: 'nap', parameters: { type: 'object' } }], initial_states: [{}], tool_defaults: { timeout_ms: 120_000 }, tools: { nap: { command: ['sleep', marker] } } }));
  return { dir, marker };
}

describe('Ctrl-C with subprocess calls in flight', () => {
  it.each([
    ['once: every call cancelled, a complete summary, exit 130', 1],
    ['twice: exits at once, and still no process is left', 2],
  ])('%s', async (_name, signals) => {
    const { dir, marker } = await sleepyEnv();
    const out = await tmp.dir('agent-runs-');
    const calls = 300;
    const child = execa('node', ['bin/agent.js', 'run', dir, '--episodes', String(calls), '--concurrency', String(calls), '--max-steps', '1', '--out', out], { reject: false, env: { AGENT_MAX_PROCESS_STARTS: '8' } });
    try {
      await vi.waitFor(() => expect(alive(marker)).toBe(calls), { timeout: 60_000, interval: 50 });
      child.kill('SIGINT');
      if (signals === 2) {
        await new Promise<void>((resolve) => child.stderr?.on('data', (c: Buffer) => c.toString().includes('interrupted') && resolve()));
        child.kill('SIGINT');
      }
      const result = await child;
      expect(result.exitCode === 130 || result.signal === 'SIGINT', result.stderr).toBe(true);
      expect(alive(marker)).toBe(0);
      if (signals === 1) {
        const summary = (await readRunSummary(out)) as unknown as { status: string; tools: Record<string, { calls: number; errors: Record<string, number> }>; rewards: { per_episode: object } };
        expect(summary.status).toBe('interrupted');
        expect(summary.tools['nap']).toMatchObject({ calls, errors: { TOOL_CANCELLED: calls } });
        // Every episode was cut short: no reward per episode is claimed (a mean of 0 was).
        expect(summary.rewards.per_episode).toEqual({ episodes: 0, mean: null, min: null, max: null });
        expect(result.stdout).toContain(`reward per episode: none, no episode ran to its end (${calls} interrupted: cut short, their rewards say nothing of the policy)`);
      }
    } finally {
      child.kill('SIGKILL');
      if (alive(marker) > 0) execFileSync('pkill', ['-9', '-f', marker]);
    }
  });

  it('a run that dies on its own (process.exit from a policy) kills the process groups of its calls on the way out', async () => {
    const { dir, marker } = await sleepyEnv();
    const calls = 50;
    // The policy ends the process once every call's process runs: nothing gets to cancel them.
    const policy = path.join(dir, 'policy.mjs');
    await writeFile(
      policy,
      `import { execFileSync } from 'node:child_process';
const alive = () => { try { return Number(execFileSync('pgrep', ['-c', '-f', ${JSON.stringify(marker)}], { encoding: 'utf8' })); } catch { return 0; } };
let armed = false;
export default (obs) => {
  if (!armed) { armed = true; setInterval(() => alive() >= ${calls} && process.exit(3), 20); }
  return { name: 'nap', params: {} };
};
`,
    );
    const result = await execa('node', ['bin/agent.js', 'run', dir, '--episodes', String(calls), '--concurrency', String(calls), '--max-steps', '1', '--policy', policy, '--out', await tmp.dir('agent-runs-')], { reject: false });
    try {
      expect(result.exitCode, result.stderr).toBe(3);
      expect(alive(marker)).toBe(0);
    } finally {
      if (alive(marker) > 0) execFileSync('pkill', ['-9', '-f', marker]);
    }
  });
});

/**
 * Fault tests of a run: tools that answer at once (the loop must still yield to I/O and signals),
 * tools that ignore cancellation, and runs that cannot work. Assertions are on counts and
 * contents, never on wall-clock time.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { MemoryStateStore, readRunFolder, Run } from '../internal.js';

const scratchDirs = scratch();
afterAll(() => scratchDirs.cleanup());
const tmp = (prefix: string): Promise<string> => scratchDirs.dir(prefix);

/** An env folder with one integer counter and the given tools module. */
export async function counterEnv(tools: string, extra: Record<string, unknown> = {}): Promise<string> {
  const dir = await tmp('agent-env-');
  await mkdir(dir, { recursive: true });
  const files: Record<string, unknown> = {
    'state_schema.json': { type: 'object', required: ['n'], properties: { n: { type: 'integer', minimum: 0, maximum: 1_000_000 } } },
    'action_schema.json': { properties: { bump: { params: {} } } },
    'reward_schema.json': { properties: { r: { type: 'number', delay_ms: 0 } } },
    'initial_states.json': [{ n: 0 }],
    ...extra,
  };
  for (const [name, value] of Object.entries(files)) await writeFile(path.join(dir, name), JSON.stringify(value));
  await writeFile(path.join(dir, 'tools.mjs'), tools);
  return dir;
}

const INSTANT = `export const bump = (_p, ctx) => ({ observation: ctx.state.n + 1, patch: [{ op: 'replace', path: '/n', value: ctx.state.n + 1 }], rewards: { r: 1 } });`;

describe('a run of tools that answer at once', () => {
  it('yields to timers and I/O: a timer set while it runs interrupts it long before the last episode', async () => {
    const env = await counterEnv(INSTANT);
    const store = new MemoryStateStore();
    const run = await Run.prepare({ env, episodes: 200_000, concurrency: 8, maxSteps: 5, out: await tmp('agent-runs-'), store });
    const controller = new AbortController();
    let written = -1;
    // Armed once the first episode is in (a loaded machine may take longer than 50 ms to get there).
    const off = run.events.on('episode_finished', () => {
      off();
      setTimeout(() => controller.abort(new Error('interrupted')), 50);
    });
    const summary = await run.execute(controller.signal);
    written = (await readFile(path.join(run.dir as string, 'events.jsonl'), 'utf8')).split('\n').length;
    expect(summary.status).toBe('interrupted');
    expect(summary.episodes.finished).toBeGreaterThan(0);
    expect(summary.episodes.finished).toBeLessThan(200_000);
    expect(written).toBeGreaterThan(summary.episodes.finished);
    // Memory stays flat: a finished episode's history is in the folder, not in the process.
    const kept = await Promise.all(Array.from({ length: summary.episodes.finished }, (_, i) => store.bounds(`ep-${i}`)));
    expect(kept.filter((b) => b !== undefined)).toEqual([]);
    // The folder agrees with itself: every episode's steps are its trajectory lines, and every
    // record says the run's episode index.
    const folder = await readRunFolder(run.dir as string);
    const finished = folder.events.filter((e) => e['type'] === 'episode_finished') as { episode: number; steps: number; reason: string }[];
    for (const e of finished.slice(0, 50)) expect(folder.trajectories.filter((t) => t.episode === e.episode)).toHaveLength(e.steps);
    const settled = folder.events.filter((e) => e['type'] === 'trace_settled') as { instance_id: string; episode: number }[];
    expect(settled.every((e) => e.instance_id === `ep-${e.episode}`)).toBe(true);
    // Interrupted episodes are kept out of the reward means (5 steps × reward 1 each otherwise).
    expect(finished.some((e) => e.reason === 'interrupted')).toBe(true);
    expect(summary.rewards.per_episode.min).toBe(5);
  });
});

describe('a tool that ignores its AbortSignal', () => {
  it('does not hold the run: its trace settles as cancelled and the summary names the call it left running', async () => {
    const env = await counterEnv(`export const bump = () => new Promise((resolve) => { globalThis.releaseStuckTool = () => resolve({ observation: 'late' }); });`);
    const run = await Run.prepare({ env, episodes: 1, concurrency: 1, maxSteps: 1, out: await tmp('agent-runs-') });
    const controller = new AbortController();
    run.events.on('dispatched', () => controller.abort(new Error('interrupted')));
    const summary = await run.execute(controller.signal);
    try {
      expect(summary.status).toBe('interrupted');
      expect(summary.abandoned_calls).toEqual([{ tool: 'bump', trace_id: 'ep-0:1' }]);
      const folder = await readRunFolder(run.dir as string);
      expect(folder.events.some((e) => e['type'] === 'calls_abandoned')).toBe(true);
      expect(folder.trajectories).toMatchObject([{ status: 'failed', error: { code: 'TOOL_CANCELLED' } }]);
    } finally {
      (globalThis as { releaseStuckTool?: () => void }).releaseStuckTool?.();
    }
  });
});

describe('a run that cannot work', () => {
  it('says so when every step failed, counting a refused patch (STATE_INVALID) against its tool', async () => {
    const env = await counterEnv(`export const bump = () => ({ patch: [{ op: 'replace', path: '/n', value: -1 }] });`);
    const run = await Run.prepare({ env, episodes: 2, concurrency: 1, maxSteps: 2, out: await tmp('agent-runs-') });
    const summary = await run.execute();
    expect(summary.tools['bump']).toMatchObject({ calls: 4, failed: 4, errors: { STATE_INVALID: 4 } });
    expect(summary.problem).toMatch(/^every step failed \(4 of 4; STATE_INVALID ×4: tool 'bump' returned a patch that makes the state invalid .* \/n: must be >= 0/);
  });

  it('says so when no action was ever enabled', async () => {
    const env = await counterEnv(INSTANT, { 'action_schema.json': { properties: { bump: { params: {}, enabled_if: 'n > 5' } } } });
    const summary = await (await Run.prepare({ env, episodes: 2, out: await tmp('agent-runs-') })).execute();
    expect(summary.problem).toMatch(/^no action was ever enabled/);
  });

  it('says so when every episode ended in a policy error', async () => {
    const env = await counterEnv(INSTANT);
    const policy = (): never => {
      throw new TypeError('policy bug');
    };
    const summary = await (await Run.prepare({ env, episodes: 3, policy, out: await tmp('agent-runs-') })).execute();
    expect(summary.episodes.by_reason).toEqual({ policy_error: 3 });
    expect(summary.problem).toBe('every episode ended in a policy error: the policy threw: TypeError: policy bug');
  });

  it('has no problem when some steps work', async () => {
    const env = await counterEnv(INSTANT);
    const summary = await (await Run.prepare({ env, episodes: 2, maxSteps: 3, out: await tmp('agent-runs-') })).execute();
    expect(summary.problem).toBeUndefined();
    expect(summary.rewards.per_episode).toEqual({ episodes: 2, mean: 3, min: 3, max: 3 });
  });
});

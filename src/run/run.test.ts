import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readRunFolder, recordedSteps, Run, type Policy, type RunEvent } from '../internal.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function outDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'agent-runs-'));
  dirs.push(d);
  return d;
}

describe('Run', () => {
  it('runs the weather env with the random policy and writes a valid run folder', async () => {
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 6, concurrency: 3, maxSteps: 4, seed: 1, out: await outDir(), toolOptions: { latency_scale: 0 } });
    const finished: number[] = [];
    run.events.on('episode_finished', (e) => finished.push(e.episode));
    const summary = await run.execute();
    expect(summary).toMatchObject({ status: 'completed', episodes: { requested: 6, finished: 6, by_reason: { max_steps: 6 } }, steps: { total: 24, failed: 0 } });
    expect(finished.sort()).toEqual([0, 1, 2, 3, 4, 5]);
    const folder = await readRunFolder(run.dir as string);
    expect(folder.trajectories).toHaveLength(24);
    expect(folder.trajectories.every((t) => t.rewards['llm_score']?.status === 'pending' && t.rewards['api_latency']?.status === 'arrived')).toBe(true);
    expect(folder.trajectories.filter((t) => t.episode === 2).map((t) => t.step)).toEqual([1, 2, 3, 4]);
    // The judge module delivered llm_score for every step before the folder closed.
    expect(folder.summary['rewards']).toMatchObject({ by_source: { llm_score: { binding: 'module', arrived: 24, pending: 0, sla: { expected: 24, arrived: 24 } }, api_latency: { binding: 'tool', arrived: 24, pending: 0 } } });
    expect(folder.rewards.filter((r) => r.type === 'reward_arrived' && r.source === 'llm_score')).toHaveLength(24);
    expect(folder.episodes).toHaveLength(6);
    // Per episode, the summary counts the delayed llm_score too, not only what was known when each episode ended.
    const total = folder.trajectories.reduce((s, t) => s + t.reward, 0) + folder.rewards.reduce((s, r) => s + (r.value ?? 0), 0);
    expect((folder.summary['rewards'] as { per_episode: { mean: number } }).per_episode.mean).toBeCloseTo(total / 6, 4);
    expect(folder.states.map((s) => s.state_id).sort()).toEqual(['initial-0', 'initial-1', 'initial-2', 'initial-3']);
    expect(folder.events[0]).toMatchObject({ event_seq: 1, type: 'run_started' });
    expect(folder.events.at(-1)).toMatchObject({ type: 'run_finished', status: 'completed' });
  });

  it('produces the same trajectories for the same seed, whatever the concurrency', async () => {
    const trajectory = async (concurrency: number): Promise<unknown[]> => {
      const run = await Run.prepare({ env: 'fixtures/weather', episodes: 4, concurrency, maxSteps: 3, seed: 42, out: await outDir(), toolOptions: { latency_scale: 0 } });
      await run.execute();
      return recordedSteps((await readRunFolder(run.dir as string)).trajectories);
    };
    expect(await trajectory(1)).toEqual(await trajectory(4));
  });

  it('stops gracefully when interrupted: calls in flight cancelled, folder flushed and marked', async () => {
    const controller = new AbortController();
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 50, concurrency: 4, maxSteps: 20, out: await outDir(), toolOptions: { latency_scale: 0.01 } });
    let settled = 0;
    run.events.on('trace_settled', () => {
      if (++settled === 10) controller.abort(new Error('SIGINT'));
    });
    const summary = await run.execute(controller.signal);
    expect(summary.status).toBe('interrupted');
    expect(summary.episodes.finished).toBeLessThan(50);
    expect(summary.episodes.by_reason.interrupted).toBeGreaterThan(0);
    const folder = await readRunFolder(run.dir as string);
    expect(folder.summary['status']).toBe('interrupted');
    expect(run.progress().pending).toEqual([]);
  });

  it('ends an episode with policy_error when the policy returns an invalid action, and goes on', async () => {
    const policy: Policy = (obs) => (obs.episode === 1 ? { name: 'get_weather', params: { city: 3 } } : obs.step < 2 ? { name: 'get_weather', params: { city: '上海' } } : null);
    const events: RunEvent[] = [];
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 3, concurrency: 1, policy, out: await outDir(), toolOptions: { latency_scale: 0 } });
    run.events.on('episode_finished', (e) => events.push(e));
    const summary = await run.execute();
    expect(events.map((e) => (e.type === 'episode_finished' ? [e.episode, e.reason, e.steps] : null))).toEqual([
      [0, 'policy_stop', 2],
      [1, 'policy_error', 0],
      [2, 'policy_stop', 2],
    ]);
    expect(events[1]).toMatchObject({ error: { code: 'PARAMS_INVALID' } });
    expect(summary.episodes.finished).toBe(3);
  });

  it('refuses bad options and a bad env before writing anything', async () => {
    const out = await outDir();
    await expect(Run.prepare({ env: 'fixtures/weather', episodes: 0, out })).rejects.toMatchObject({ code: 'BAD_USAGE' });
    await expect(Run.prepare({ env: 'fixtures/nope', out })).rejects.toMatchObject({ code: 'DEFINITION_NOT_FOUND' });
    await expect(Run.prepare({ env: 'fixtures/weather', policy: 'fixtures/nope.ts', out })).rejects.toMatchObject({ code: 'BAD_USAGE' });
  });
});

import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { readRunFolder, recordedSteps, Run, type JsonValue, type Policy } from '../internal.js';
import { threadCount } from './run-options.js';

const scratchDirs = scratch();
afterAll(() => scratchDirs.cleanup());
const tmp = (prefix: string): Promise<string> => scratchDirs.dir(prefix);

/** An env whose one tool says which thread ran it, and a policy module that calls it twice. */
async function whereEnv(): Promise<{ env: string; policy: string }> {
  const env = await tmp('agent-threads-env-');
  await writeFile(
    path.join(env, 'env.json'),
    JSON.stringify({
      name: 'where',
      state: { type: 'object', properties: { calls: { type: 'integer' } } },
      actions: [{ name: 'where', parameters: { type: 'object', properties: {} } }],
      module: 'tools.ts',
      initial_states: [{ calls: 0 }],
    }),
  );
  await writeFile(
    path.join(env, 'tools.ts'),
    `import { threadId } from 'node:worker_threads';
export const where = (_params: unknown, ctx: { state: { calls: number } }) => ({ observation: { thread: threadId }, patch: [{ op: 'replace', path: '/calls', value: ctx.state.calls + 1 }] });
`,
  );
  const policy = path.join(env, 'policy.ts');
  await writeFile(policy, `export default (obs: { step: number }) => (obs.step < 2 ? { name: 'where', params: {} } : null);\n`);
  return { env, policy };
}

describe('a run over worker threads', () => {
  it('writes the records a run in one thread writes, for the same seed', async () => {
    const folder = async (threads: number): Promise<Awaited<ReturnType<typeof readRunFolder>>> => {
      const run = await Run.prepare({ env: 'fixtures/weather', episodes: 12, concurrency: 4, threads, maxSteps: 3, seed: 7, out: await tmp('agent-threads-'), toolOptions: { latency_scale: 0 } });
      const summary = await run.execute();
      expect(summary).toMatchObject({ status: 'completed', episodes: { finished: 12 }, steps: { total: 36, failed: 0 } });
      return readRunFolder(run.dir as string);
    };
    const [one, two] = [await folder(1), await folder(2)];
    expect(two.summary['config']).toMatchObject({ threads: 2, concurrency: 4 });
    expect(one.summary['config']).not.toHaveProperty('threads');
    expect(recordedSteps(two.trajectories)).toEqual(recordedSteps(one.trajectories));
    const byEpisode = (f: typeof one): unknown[] => f.episodes.map(({ started_at: _s, finished_at: _f, ...rest }) => rest).sort((a, b) => a.episode - b.episode);
    expect(byEpisode(two)).toEqual(byEpisode(one));
    expect(two.states.map((s) => s.state_id).sort()).toEqual(one.states.map((s) => s.state_id).sort());
    // The judge's delayed rewards, given in the threads, reach the folder and the summary all the same.
    expect(two.rewards.filter((r) => r.type === 'reward_arrived' && r.source === 'llm_score')).toHaveLength(36);
    expect(two.summary['rewards']).toMatchObject({ by_source: { llm_score: { arrived: 36, pending: 0 } } });
    const counts = (f: typeof one): Record<string, number> => f.events.reduce<Record<string, number>>((c, e) => ({ ...c, [String(e['type'])]: (c[String(e['type'])] ?? 0) + 1 }), {});
    expect(counts(two)).toEqual(counts(one));
  });

  it('runs episodes in every thread, each with its own env, and hands final states to onEpisodeEnd', async () => {
    const { env, policy } = await whereEnv();
    const finals = new Map<number, JsonValue>();
    const run = await Run.prepare({ env, policy, episodes: 16, concurrency: 4, threads: 2, out: await tmp('agent-threads-'), onEpisodeEnd: (i, state) => finals.set(i, state) });
    await run.execute();
    const folder = await readRunFolder(run.dir as string);
    const threads = new Set(folder.trajectories.map((t) => (t.observation as { thread: number }).thread));
    expect([...threads].sort()).toHaveLength(2);
    expect(threads.has(0)).toBe(false);
    expect([...finals.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i));
    expect([...finals.values()].every((s) => (s as { calls: number }).calls === 2)).toBe(true);
  });

  it('stops when interrupted: the episodes in flight end interrupted, in the folder as in the summary', async () => {
    const controller = new AbortController();
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 200, concurrency: 8, threads: 2, maxSteps: 20, out: await tmp('agent-threads-'), toolOptions: { latency_scale: 0.01 } });
    let settled = 0;
    run.events.on('trace_settled', () => {
      if (++settled === 20) controller.abort(new Error('SIGINT'));
    });
    const summary = await run.execute(controller.signal);
    expect(summary.status).toBe('interrupted');
    expect(summary.episodes.finished).toBeLessThan(200);
    expect(summary.episodes.by_reason['interrupted']).toBeGreaterThan(0);
    const folder = await readRunFolder(run.dir as string);
    expect(folder.episodes.filter((e) => e.reason === 'interrupted').length).toBe(summary.episodes.by_reason['interrupted']);
    expect(folder.summary['status']).toBe('interrupted');
  });

  it('refuses what threads cannot share when asked for them, and runs it in one thread by default', async () => {
    const out = await tmp('agent-threads-');
    const policy: Policy = () => null;
    await expect(Run.prepare({ env: 'fixtures/weather', policy, threads: 2, out })).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringMatching(/not for this run: a policy given in code/) });
    await expect(Run.prepare({ env: 'fixtures/weather', store: 'redis://127.0.0.1:1/0', threads: 2, out })).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringMatching(/durable run/) });
    await expect(Run.prepare({ env: 'fixtures/weather', threads: 0, out })).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringMatching(/threads must be a whole number/) });
    const run = await Run.prepare({ env: 'fixtures/weather', policy, episodes: 1_000, out });
    expect(run.config).not.toHaveProperty('threads');
    await run[Symbol.asyncDispose]();
  });

  it('spreads a run by default over the cores once there are enough episodes for them', () => {
    const auto = (episodes: number, concurrency: number, cores: number, policy = 'random'): number => threadCount({ env: 'e', policy }, episodes, concurrency, cores);
    expect(auto(20, 8, 2)).toBe(1);
    expect(auto(999, 8, 2)).toBe(1);
    expect(auto(1_000, 8, 2)).toBe(2);
    expect(auto(10_000, 8, 16)).toBe(8);
    expect(auto(10_000, 1, 16)).toBe(1);
    expect(auto(10_000, 64, 1)).toBe(1);
    expect(auto(10_000, 64, 4, "cmd:python3 agent.py")).toBe(1);
  });
});

/**
 * `agent export --format chat` and `chat-parquet`: one OpenAI-style conversation per episode, for a
 * plain run and a τ-bench benchmark run; `--format verl`: a suite's tasks as a verl dataset.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { afterAll, describe, expect, it } from 'vitest';
import type { VerlRow } from '../src/internal.js';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

interface Chat {
  episode: number;
  task_id?: string;
  success?: boolean;
  metrics?: Record<string, number>;
  reward: number;
  step_rewards: (number | null)[];
  tools: { type: string; function: { name: string; parameters: object } }[];
  messages: { role: string; content: string; tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[]; tool_call_id?: string }[];
}

async function readParquet(file: string): Promise<Record<string, unknown>[]> {
  return parquetReadObjects({ file: await asyncBufferFromFile(file) });
}

async function chats(dir: string, ...flags: string[]): Promise<Chat[]> {
  const r = await runAgent(['export', dir, '--format', 'chat', ...flags]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Chat);
}

/** Every tool call is answered exactly once, by the tool turn that follows it. */
function expectPaired(chat: Chat): void {
  const calls = chat.messages.flatMap((m) => m.tool_calls ?? []).map((c) => c.id);
  const answers = chat.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
  expect(answers).toEqual(calls);
  expect(new Set(calls).size).toBe(calls.length);
}

describe('agent export --format chat', () => {
  it('writes one conversation per episode of a run: tool calls with JSON-string arguments, each answered once, the env actions as tools', async () => {
    const out = await tmp.dir('chat-runs-');
    const run = await runAgent(['run', 'fixtures/weather', '--episodes', '3', '--max-steps', '3', '--tool-option', 'latency_scale=0.01', '--out', out]);
    const dir = /run folder: (.*)/.exec(run.stdout)?.[1] as string;
    const all = await chats(dir);
    expect(all.map((c) => c.episode)).toEqual([0, 1, 2]);
    for (const chat of all) {
      expectPaired(chat);
      expect(chat.messages[0]).toMatchObject({ role: 'user', content: expect.stringContaining('user_location') });
      const call = chat.messages[1]?.tool_calls?.[0];
      expect(call).toMatchObject({ type: 'function', function: { name: 'get_weather' } });
      expect(typeof JSON.parse(call?.function.arguments as string)).toBe('object');
      expect(chat.tools).toEqual([{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }]);
      expect(chat.step_rewards).toHaveLength(chat.messages.filter((m) => m.role === 'tool').length);
    }
    const noVerdicts = await runAgent(['export', dir, '--verdict', 'calls']);
    expect([noVerdicts.code, noVerdicts.stderr]).toEqual([2, expect.stringMatching(/is not a benchmark run/)]);
    // chat-parquet: the same records, messages nested (a role's missing fields null), tools as JSON text.
    const written = await runAgent(['export', dir, '--format', 'chat-parquet']);
    expect(written.stderr).toContain(`3 episodes written to ${path.join(dir, 'chat.parquet')}`);
    const rows = await readParquet(path.join(dir, 'chat.parquet'));
    expect(rows.map((r) => ({ ...r, tools: JSON.parse(r['tools'] as string) as unknown, messages: (r['messages'] as Record<string, unknown>[]).map((m) => Object.fromEntries(Object.entries(m).filter(([, v]) => v !== null))) }))).toEqual(all.map((c) => ({ ...c, task_id: null, success: null, metrics: null })));
  });

  it("a benchmark run's conversations carry the policy, the task's instruction and its verdicts, zero-step episodes included", async () => {
    const out = await tmp.dir('chat-bench-');
    const tasks = ['airline-test-0', 'airline-test-12'];
    const metric = path.join(out, 'calls.mjs');
    await writeFile(metric, 'export default (episode) => episode.steps.length + 0.5;\n');
    const bench = await runAgent(['benchmark', 'tau-bench/airline', '--policy', 'gold', '--tasks', tasks.join(','), '--metric', metric, '--out', out, '--format', 'json']);
    expect(bench.code, bench.stderr).toBe(0);
    const dir = (JSON.parse(bench.stdout) as { run_dir: string }).run_dir;
    const all = await chats(dir);
    const policy = (await readFile(path.join('fixtures/tau-bench/airline/policy.md'), 'utf8')).trim();
    expect(all.map((c) => [c.task_id, c.success, c.reward, c.metrics])).toEqual([
      ['airline-test-0', true, 1, { calls: 1.5 }],
      ['airline-test-12', true, 1, { calls: 0.5 }],
    ]);
    for (const chat of all) {
      expectPaired(chat);
      expect(chat.messages[0]).toEqual({ role: 'system', content: policy });
      expect(chat.messages[1]?.role).toBe('user');
      expect(chat.tools.length).toBeGreaterThan(10);
    }
    // The zero-step task: the request, and no call.
    expect(all[1]?.messages).toHaveLength(2);
    // The per-step export carries the verdict as the last step's reward.
    const steps = (await runAgent(['export', dir])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { task_id: string; success: boolean; reward: number; rewards: Record<string, { value: number }> });
    expect(steps.at(-1)).toMatchObject({ task_id: 'airline-test-0', success: true, reward: 1, rewards: { success: { value: 1 }, 'metric:calls': { value: 1.5 } } });
    // --verdict: a custom metric is the final reward instead (success still rides along); an unknown one is refused, naming those there are.
    expect((await chats(dir, '--verdict', 'calls')).map((c) => [c.reward, c.success])).toEqual([
      [1.5, true],
      [0.5, true],
    ]);
    const unknown = await runAgent(['export', dir, '--verdict', 'judge']);
    expect([unknown.code, unknown.stdout, unknown.stderr]).toEqual([2, '', expect.stringMatching(/computed no metric 'judge'[\s\S]*success or one of its metrics: calls/)]);
    // --format verl from the benchmark run: its tasks, as verl's RLHFDataset and tool agent read them.
    const file = path.join(out, 'verl.parquet');
    expect((await runAgent(['export', dir, '--format', 'verl', '--out', file])).stderr).toContain('2 tasks written');
    const rows = (await readParquet(file)) as unknown as VerlRow[];
    expect(rows.map((r) => [r.extra_info.index, r.extra_info.task_id, r.agent_name, r.prompt.map((m) => m.role)])).toEqual([
      [0, 'airline-test-0', 'tool_agent', ['system', 'user']],
      [1, 'airline-test-12', 'tool_agent', ['system', 'user']],
    ]);
    expect(rows[0]?.prompt[0]?.content).toContain(policy);
    expect(rows[0]?.prompt[1]?.content).toBe(all[0]?.messages[1]?.content);
    expect(rows[0]?.extra_info.tools_kwargs['book_reservation']).toEqual({ create_kwargs: { task_id: 'airline-test-0' } });
    expect(Object.keys(rows[0]?.extra_info.tools_kwargs ?? {})).not.toContain('respond');
    expect(rows[0]?.extra_info.interaction_kwargs).toEqual({ name: 'agentic_rl', task_id: 'airline-test-0' });
    expect((JSON.parse(rows[0]?.reward_model.ground_truth ?? '') as { actions: unknown[] }).actions.length).toBeGreaterThan(0);
  });

  it('--format verl turns a whole suite into a dataset by name, and refuses what has no tasks', async () => {
    const file = path.join(await tmp.dir('verl-'), 'airline.parquet');
    expect((await runAgent(['export', 'tau-bench/airline', '--format', 'verl', '--out', file])).stderr).toContain('50 tasks written');
    expect(new Set((await readParquet(file)).map((r) => (r['extra_info'] as { task_id: string }).task_id)).size).toBe(50);
    const plain = await runAgent(['export', 'fixtures/weather', '--format', 'verl', '--out', file]);
    expect([plain.code, plain.stderr]).toEqual([2, expect.stringMatching(/no split 'test'/)]);
    const split = await runAgent(['export', 'fixtures/weather', '--split', 'train']);
    expect([split.code, split.stderr]).toEqual([2, expect.stringMatching(/--split goes with --format verl/)]);
  });
});

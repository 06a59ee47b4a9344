/** `agent export --format chat`: one OpenAI-style conversation per episode, for a plain run and a τ-bench benchmark run. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

interface Chat {
  episode: number;
  task_id?: string;
  success?: boolean;
  reward: number;
  step_rewards: (number | null)[];
  tools: { type: string; function: { name: string; parameters: object } }[];
  messages: { role: string; content: string; tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[]; tool_call_id?: string }[];
}

async function chats(dir: string): Promise<Chat[]> {
  const r = await runAgent(['export', dir, '--format', 'chat']);
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
  });

  it("a benchmark run's conversations carry the policy, the task's instruction and its verdict, zero-step episodes included", async () => {
    const out = await tmp.dir('chat-bench-');
    const tasks = ['airline-test-0', 'airline-test-12'];
    const bench = await runAgent(['benchmark', 'tau-bench/airline', '--policy', 'gold', '--tasks', tasks.join(','), '--out', out, '--format', 'json']);
    expect(bench.code, bench.stderr).toBe(0);
    const dir = (JSON.parse(bench.stdout) as { run_dir: string }).run_dir;
    const all = await chats(dir);
    const policy = (await readFile(path.join('fixtures/tau-bench/airline/policy.md'), 'utf8')).trim();
    expect(all.map((c) => [c.task_id, c.success, c.reward])).toEqual([
      ['airline-test-0', true, 1],
      ['airline-test-12', true, 1],
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
    expect(steps.at(-1)).toMatchObject({ task_id: 'airline-test-0', success: true, rewards: { success: { value: 1 } } });
  });
});

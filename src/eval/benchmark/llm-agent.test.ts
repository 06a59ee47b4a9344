/**
 * The llm: policy and the simulated user against fake model servers on 127.0.0.1 (no key, no
 * network): a scripted agent that calls the gold tools and then says the expected output, and a
 * scripted user that opens, then ends with ###STOP###. Both wire formats: OpenAI-compatible
 * tool_calls and Anthropic tool_use blocks.
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startFakeLlmServer, type FakeRequest } from '../../llm/fake-llm-server.js';
import { runBenchmark } from './benchmark.js';
import type { Conversation } from '../../run/llm-agent.js';
import { exportChat } from '../../replay/chat-export.js';
import { FakeOtlpCollector } from '../../observe/fake-otlp-collector.js';
import { otelConfig, type OtelConfig } from '../../observe/otel-config.js';

const SUITE = 'fixtures/tau-bench/retail';
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

interface Gold {
  id: string;
  actions: { name: string; params: Record<string, unknown> }[];
  outputs: string[];
}

async function gold(id: string): Promise<Gold> {
  const lines = (await readFile(path.join(SUITE, 'tasks', 'test.jsonl'), 'utf8')).trim().split('\n');
  return lines.map((l) => JSON.parse(l) as Gold).find((t) => t.id === id) as Gold;
}

/** Tool results the agent has been given so far, in either wire format. */
function toolResults(req: FakeRequest): number {
  return req.body.messages.reduce((n, m) => {
    if (m.role === 'tool') return n + 1;
    if (m.role === 'user' && Array.isArray(m.content)) return n + (m.content as { type: string }[]).filter((b) => b.type === 'tool_result').length;
    return n;
  }, 0);
}

describe.each([
  ['openai', 'fake-agent', 'fake-user', (url: string) => `${url}/v1`],
  ['anthropic', 'claude-fake-agent', 'claude-fake-user', (url: string) => url],
] as const)('llm: policy over %s', (provider, agentModel, userModel, base) => {
  it('talks to the simulated user, calls the tools, says the output, and scores like gold', async () => {
    const task = await gold('retail-test-2');
    await using server = await startFakeLlmServer((req) => {
      if (req.body.model === userModel) {
        const turns = req.body.messages.filter((m) => m.role === 'user').length;
        return turns === 1 ? { text: 'Hi, I need help with my orders.', inputTokens: 50, outputTokens: 8 } : { text: '###STOP###', inputTokens: 80, outputTokens: 3 };
      }
      // First a call the env would refuse (it is answered with the error, and the model tries again).
      const n = toolResults(req) - 1;
      if (n < 0) return { toolCalls: [{ name: 'cancel_everything', arguments: {} }], inputTokens: 800, outputTokens: 10 };
      const next = task.actions[n];
      // Two calls in one turn: they run one after the other and go back together.
      if (n === 0 && task.actions.length > 1) return { toolCalls: task.actions.slice(0, 2).map((a) => ({ name: a.name, arguments: a.params })), inputTokens: 900, outputTokens: 40 };
      if (next) return { toolCalls: [{ name: next.name, arguments: next.params }], inputTokens: 1000, outputTokens: 30 };
      return { text: `All done: ${task.outputs.join(', ')}.`, inputTokens: 1200, outputTokens: 20 };
    });
    const out = await mkdtemp(path.join(os.tmpdir(), 'llm-bench-'));
    dirs.push(out);
    await using collector = await FakeOtlpCollector.start();
    const otel = otelConfig({}, collector.url) as OtelConfig;
    const report = await runBenchmark({ suite: SUITE, tasks: [task.id], policy: `llm:${agentModel}`, user: `llm:${userModel}`, trials: 2, out, llm: { baseURL: base(server.url), provider }, otel });
    expect(report.tasks[0]?.trials.map((t) => t.success)).toEqual([true, true]);
    expect(report.metrics.pass_hat_k).toEqual({ '1': 1, '2': 1 });
    expect(report.metrics.invalid_action_rate.value).toBeCloseTo(1 / (task.actions.length + 2), 5);
    const cost = report.tasks[0]?.trials[0]?.cost;
    expect(cost?.input_tokens).toBeGreaterThan(1000);
    expect(cost?.usd).toBeNull(); // fake models have no price
    // The agent got the env's actions as tools (respond is its plain text) and the policy document as system prompt.
    const first = server.requests.find((r) => r.body.model === agentModel) as FakeRequest;
    const tools = (first.body.tools ?? []).map((t) => ((t as { name?: string; function?: { name: string } }).name ?? (t as { function: { name: string } }).function.name));
    expect(tools).toContain('cancel_pending_order');
    expect(tools).not.toContain('respond');
    const system = provider === 'anthropic' ? String(first.body.system) : JSON.stringify(first.body.messages[0]);
    expect(system).toContain('retail');
    // conversations.jsonl: exactly what the agent model was given and answered, in OpenAI's chat shape.
    const conversations = (await readFile(path.join(report.run_dir, 'conversations.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as Conversation);
    expect(conversations).toHaveLength(2);
    const turns = conversations[0]?.messages ?? [];
    expect(turns[0]).toMatchObject({ role: 'system', content: expect.stringContaining('retail') });
    expect(turns[1]).toEqual({ role: 'user', content: 'Hi, I need help with my orders.' });
    expect(turns.at(-1)).toEqual({ role: 'assistant', content: `All done: ${task.outputs.join(', ')}.` });
    const answers = turns.flatMap((t) => (t.role === 'tool' ? [t] : []));
    expect(answers).toHaveLength(task.actions.length + 1);
    expect(answers[0]).toMatchObject({ name: 'cancel_everything', content: expect.stringMatching(/^Error: unknown action cancel_everything \(available: .*cancel_pending_order/) });
    // Every call is answered once, in order, and its arguments are a JSON string of what the model sent.
    const calls = turns.flatMap((t) => (t.role === 'assistant' ? (t.tool_calls ?? []) : []));
    expect(answers.map((a) => a.tool_call_id)).toEqual(calls.map((c) => c.id));
    expect(calls.slice(1).map((c) => ({ name: c.function.name, params: JSON.parse(c.function.arguments) as unknown }))).toEqual(task.actions);
    // The chat export of an llm: run is that conversation, exactly, with the tools the model had.
    const chats = await exportChat(report.run_dir);
    expect(chats.map((c) => c.messages)).toEqual(conversations.map((c) => c.messages));
    expect(chats[0]).toMatchObject({ task_id: task.id, success: true, reward: 1, user_turns: 'conversation' });
    expect(await exportChat(report.run_dir, { userTurns: 'said' })).toHaveLength(chats.length);
    expect(chats[0]?.tools.map((t) => t.function.name)).toContain('cancel_pending_order');
    expect(chats[0]?.tools.map((t) => t.function.name)).not.toContain('respond');
    // Every model call is an llm_call event, whose tokens add up to the conversation's usage...
    const llmCalls = (await readFile(path.join(report.run_dir, 'events.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { type: string; role?: string; model?: string; episode?: number; input_tokens?: number; output_tokens?: number; instance_id?: string }).filter((e) => e.type === 'llm_call');
    expect(new Set(llmCalls.map((c) => `${c.role}:${c.model}`))).toEqual(new Set([`policy:${agentModel}`, `user:${userModel}`]));
    for (const c of conversations) {
      const mine = llmCalls.filter((e) => e.episode === c.episode);
      expect([mine.reduce((s, e) => s + (e.input_tokens ?? 0), 0), mine.reduce((s, e) => s + (e.output_tokens ?? 0), 0)]).toEqual([c.usage.input_tokens, c.usage.output_tokens]);
    }
    expect(llmCalls).toHaveLength(server.requests.length);
    // ...and, traced, a GenAI `chat <model>` client span under its episode.
    const chatSpans = collector.spans.filter((s) => s.name.startsWith('chat '));
    expect(chatSpans).toHaveLength(llmCalls.length);
    const roots = new Map(collector.spans.filter((s) => s.parentSpanId === '').map((s) => [s.spanId, s]));
    for (const span of chatSpans) {
      expect(roots.get(span.parentSpanId)?.traceId).toBe(span.traceId);
      expect(span).toMatchObject({ kind: 3, attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': provider, 'gen_ai.request.model': expect.stringMatching(/fake-(agent|user)$/) } });
    }
    expect(chatSpans.reduce((s, x) => s + (x.attributes['gen_ai.usage.input_tokens'] as number), 0)).toBe(llmCalls.reduce((s, e) => s + (e.input_tokens ?? 0), 0));
  });
});

describe('chat export of gold episodes', () => {
  it("marks a τ-bench task's instruction as the simulated user's private scenario, and leaves it out of the said-only form", async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'gold-chat-'));
    dirs.push(out);
    const report = await runBenchmark({ suite: SUITE, tasks: ['retail-test-0'], policy: 'gold', out });
    const [chat] = await exportChat(report.run_dir);
    // What the agent's user message would be: "You are Yusuf Rossi in 19122. You want to…", a scenario no user says.
    expect(chat?.messages[1]).toMatchObject({ role: 'user', content: expect.stringMatching(/^You are /) });
    expect(chat?.user_turns).toBe('user_scenario');
    const leftOut: [number, string][] = [];
    expect(await exportChat(report.run_dir, { userTurns: 'said', onLeftOut: (n, why) => leftOut.push([n, why]) })).toEqual([]);
    expect(leftOut).toEqual([[1, expect.stringContaining('scenario for a simulated user')]]);
  });
});

describe('llm: policy, refused early', () => {
  it('without a key or a local server, names the variable before anything runs', async () => {
    const saved = process.env['OPENAI_API_KEY'];
    delete process.env['OPENAI_API_KEY'];
    try {
      await expect(runBenchmark({ suite: SUITE, tasks: ['retail-test-2'], policy: 'llm:gpt-4o' })).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('$OPENAI_API_KEY') });
      await expect(runBenchmark({ suite: SUITE, tasks: ['retail-test-2'], policy: 'gold', user: 'llm:gpt-4o' })).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('--user needs an llm: policy') });
    } finally {
      if (saved !== undefined) process.env['OPENAI_API_KEY'] = saved;
    }
  });

  it('with a server that refuses connections, names its URL and LLM_UNAVAILABLE before any episode', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/v1`;
    await new Promise((resolve) => closed.close(resolve));
    const out = await mkdtemp(path.join(os.tmpdir(), 'llm-refused-'));
    try {
      await expect(runBenchmark({ suite: SUITE, tasks: ['retail-test-2'], policy: 'llm:gpt-4o-mini', llm: { baseURL: url }, out })).rejects.toMatchObject({ code: 'LLM_UNAVAILABLE', message: expect.stringMatching(new RegExp(`cannot reach the inference server at ${url}.*ECONNREFUSED`)) });
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});

/**
 * Token mode end to end against a fake vLLM server (src/llm/fake-vllm-server.ts): rollouts of the
 * lookup suite, then `exportTokens`: every turn's ids and logprobs are exactly the server's, the
 * prompt of every generation is the sequence before it, the mask is 1 exactly on generated ids,
 * and the judge's late reward lands on the turn that answered. Then what goes wrong: a call the
 * parser cannot read, the context limit, a server that is not vLLM-compatible, one that dies.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createElement } from 'react';
import { render } from 'ink-testing-library';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { TimelinePane } from '../../ui/debug/timeline-pane.js';
import { decode, encode, FAKE_END_OF_TURN, startFakeVllmServer } from '../../llm/fake-vllm-server.js';
import { exportTokens } from '../../replay/token-export.js';
import { FolderFeed } from '../../replay/folder-feed.js';
import { timeline } from '../../console/console-api.js';
import { runBenchmark, type BenchmarkOptions } from './benchmark.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function outDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'tokens-'));
  dirs.push(d);
  return d;
}

/** A model that looks the key up, then answers with the code the lookup gave. */
function lookupModel(prompt: string): string {
  const code = /"code":"(\w+)"\}\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/.exec(prompt)?.[1];
  if (code !== undefined) return `Found it.\n<tool_call>\n{"name": "answer", "arguments": {"code": "${code}"}}\n</tool_call>`;
  const key = [...prompt.matchAll(/the key '([a-z-]+)'/g)].pop()?.[1] ?? 'none';
  return `<tool_call>\n{"name": "lookup_code", "arguments": {"key": "${key}"}}\n</tool_call>`;
}

function bench(url: string, out: string, extra: Partial<BenchmarkOptions> = {}): Promise<Awaited<ReturnType<typeof runBenchmark>>> {
  return runBenchmark({ suite: 'fixtures/lookup', tasks: ['lookup-test-0', 'lookup-test-1'], trials: 2, policy: 'llm:fake-model', out, ...extra, llm: { baseURL: url, tokens: true, maxTokens: 200, ...extra.llm } });
}

describe('token mode', () => {
  it("records every turn's ids and logprobs as the server produced them, with exact masks and rewards on the right turn", async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel });
    const report = await bench(server.url, await outDir());
    expect(report.metrics.success_rate.value).toBe(1);
    const records = await exportTokens(report.run_dir);
    expect(records.map((r) => [r.task_id, r.trial])).toEqual([
      ['lookup-test-0', 0],
      ['lookup-test-0', 1],
      ['lookup-test-1', 0],
      ['lookup-test-1', 1],
    ]);
    const generated = server.completions.slice(1); // the first is the start-up check
    // The tokenizer splits the generated text otherwise (`{"` is one id to it): ids re-encoded from the text would not match below.
    expect(generated.filter((g) => encode(decode(g.token_ids)).length < g.token_ids.length).length).toBeGreaterThan(0);
    const used = new Set<number>();
    for (const r of records) {
      expect(r.loss_mask).toHaveLength(r.input_ids.length);
      expect(r.logprobs).toHaveLength(r.input_ids.length);
      expect(r.turns).toHaveLength(2);
      for (const t of r.turns) {
        // The completion this turn is: generated from exactly the sequence before it, its ids and logprobs exactly these.
        const same = (a: readonly (number | null)[], b: readonly number[]): boolean => a.length === b.length && a.every((v, i) => v === b[i]);
        const k = generated.findIndex((g, i) => !used.has(i) && same(r.input_ids.slice(0, t.start), g.prompt_token_ids) && same(r.input_ids.slice(t.start, t.end), g.token_ids) && same(r.logprobs.slice(t.start, t.end), g.logprobs));
        expect(k, `episode ${r.episode}'s turn at ${t.start} is a completion the server produced`).toBeGreaterThanOrEqual(0);
        used.add(k);
        expect(r.input_ids[t.end - 1]).toBe(FAKE_END_OF_TURN);
      }
      const inTurn = (i: number): boolean => r.turns.some((t) => i >= t.start && i < t.end);
      expect(r.loss_mask.every((m, i) => m === (inTurn(i) ? 1 : 0))).toBe(true);
      expect(r.logprobs.every((l, i) => (l === null) === !inTurn(i))).toBe(true);
      expect(r.prompt_length).toBe(r.turns[0]?.start);
      // The lookup's turn earns nothing; the answer's gets the judge's late 1 and the benchmark's success.
      expect(r.turns.map((t) => t.reward)).toEqual([0, 2]);
      expect(r.reward).toBe(2);
      expect(r.drift).toBe(false);
    }
    expect(used.size).toBe(generated.length);
    // The trials of a task sample with their own seeds; the settings are recorded with the run.
    expect(new Set(generated.map((g) => g.seed)).size).toBe(generated.length);
    const manifest = JSON.parse(await readFile(path.join(report.run_dir, 'run.json'), 'utf8')) as { config: { policy: string; llm: unknown } };
    expect(manifest.config.policy).toBe('llm:fake-model');
    expect(manifest.config.llm).toMatchObject({ model: 'fake-model', tokens: true, tool_parser: 'hermes', sampling: { temperature: 1, top_p: 1, max_tokens: 200, seed: 0 }, max_model_len: 32_768 });
  });

  it('renders tool results after the turn with the template, keeping the tokens the model did not generate as the environment\'s', async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel });
    const report = await bench(server.url, await outDir(), { tasks: ['lookup-test-0'], trials: 1 });
    const [r] = await exportTokens(report.run_dir);
    const [first, second] = r?.turns ?? [];
    const between = server.completions[2]?.prompt_token_ids.slice(first?.end);
    // The template's "\n" after the model's <|im_end|>, then the tool result as a user turn, then the generation prompt.
    expect(decode(between ?? [])).toBe('\n<|im_start|>user\n<tool_response>\n{"key":"frost-ram","code":"QN9Y"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
    expect(second?.start).toBe(server.completions[2]?.prompt_token_ids.length);
    // The consoles show each turn beside the trace it chose: its ids, their text and logprobs, the environment's before it.
    await using feed = await FolderFeed.open(report.run_dir, { follow: false });
    await feed.ready();
    const tl = await timeline(feed, 0);
    expect(tl.turns.map((t) => t.step)).toEqual(tl.traces.map((t) => t.step));
    expect(tl.turns[1]?.env_ids).toEqual(between);
    expect(tl.turns[1]?.token_strs?.join('')).toBe(decode(server.completions[2]?.token_ids ?? []));
    expect(tl.turns[1]?.text).toBe('Found it.\n<tool_call>\n{"name": "answer", "arguments": {"code": "QN9Y"}}\n</tool_call>');
    const view = render(createElement(TimelinePane, { feed, episode: 0, width: 160, height: 30, active: true, onState: () => undefined }));
    try {
      await vi.waitFor(() => expect(view.lastFrame()).toContain(`model turn: prompt ${tl.turns[0]?.prompt_length} · +${tl.turns[0]?.env_ids.length} from the env (mask 0) · ${tl.turns[0]?.token_ids.length} generated (mask 1) · stop`));
      expect(view.lastFrame()).toContain('<·63 t·119 o·114 o·114 l·111');
    } finally {
      view.unmount();
    }
  });

  it('renders gold actions as the model\'s turns through the server\'s template (data for a supervised warm start)', async () => {
    await using server = await startFakeVllmServer({ reply: () => 'never asked' });
    const report = await bench(server.url, await outDir(), { policy: 'gold', trials: 1 });
    expect(report.metrics.success_rate.value).toBe(1);
    // Nothing is generated: only the start-up check asked for a completion.
    expect(server.completions).toHaveLength(1);
    const records = await exportTokens(report.run_dir);
    expect(records).toHaveLength(2);
    for (const r of records) {
      expect(r.turns.map((t) => t.gold)).toEqual([true, true]);
      // Gold turns are trained on (mask 1) but were not sampled: no logprobs.
      expect(r.logprobs.every((l) => l === null)).toBe(true);
      const first = r.turns[0] as { start: number; end: number };
      expect(decode(r.input_ids.slice(first.start, first.end))).toMatch(/^<tool_call>\n\{"name":"lookup_code","arguments":\{"key":"[a-z-]+"\}\}\n<\/tool_call><\|im_end\|>$/);
      expect(r.loss_mask.filter((m) => m === 1)).toHaveLength(r.turns.reduce((n, t) => n + t.end - t.start, 0));
    }
    // The whole sequence is what the template renders for the conversation: the env's ids and the gold turns join as a model's would.
    const text = decode(records[0]?.input_ids ?? []);
    expect(text).toContain('<|im_end|>\n<|im_start|>user\n<tool_response>\n{"key":"frost-ram","code":"QN9Y"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name":"answer","arguments":{"code":"QN9Y"}}\n</tool_call><|im_end|>');
    const manifest = JSON.parse(await readFile(path.join(report.run_dir, 'run.json'), 'utf8')) as { config: { policy: string; llm: unknown } };
    expect(manifest.config).toMatchObject({ policy: 'gold', llm: { model: 'fake-model', tokens: true } });
    // Without a server to render them, gold token turns are refused saying what is missing, before anything runs.
    await expect(runBenchmark({ suite: 'fixtures/lookup', policy: 'gold', out: await outDir(), llm: { tokens: true } })).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('needs --llm-base-url') });
  });

  it('says where a template is not prefix-stable, instead of hiding it', async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel, thinkingTemplate: true });
    const report = await bench(server.url, await outDir(), { tasks: ['lookup-test-0'], trials: 1 });
    const [r] = await exportTokens(report.run_dir);
    expect(r?.drift).toBe(true);
    await using feed = await FolderFeed.open(report.run_dir, { follow: false });
    await feed.ready();
    const [first, second] = (await timeline(feed, 0)).turns;
    expect(first?.drift).toBeUndefined();
    expect(second?.drift?.message).toMatch(/renders an assistant turn differently when tool follow it/);
    // Still token-exact: the ids are what the server generated from; and the tool result is rendered as after a user turn, with nothing of the prefix in it.
    expect(server.completions[2]?.prompt_token_ids).toEqual(r?.input_ids.slice(0, r.turns[1]?.start));
    expect(second?.drift?.message).toMatch(/the tool ids are rendered after a user turn instead/);
    expect(decode(second?.env_ids ?? [])).toBe('\n<|im_start|>user\n<tool_response>\n{"key":"frost-ram","code":"QN9Y"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
  });

  it('answers a call the parser cannot read with the error, counts it invalid, and goes on', async () => {
    await using server = await startFakeVllmServer({
      // Completion 0 is the start-up check; the episode's first turn is completion 1.
      reply: (prompt, n) => {
        if (n === 1) {
          return '<tool_call>\n{"name": "lookup_code", "arguments": {"key": }\n</tool_call>';
        }
        return lookupModel(prompt);
      },
    });
    const report = await bench(server.url, await outDir(), { tasks: ['lookup-test-0'], trials: 1 });
    expect(report.metrics.invalid_action_rate.value).toBeGreaterThan(0);
    const [r] = await exportTokens(report.run_dir);
    expect(r?.turns.map((t) => t.invalid === undefined)).toEqual([false, true, true]);
    expect(r?.turns[0]?.invalid).toMatch(/^tool call 1: not JSON/);
    expect(r?.success).toBe(true);
  });

  it('ends an episode truncated at the context limit, before the server would refuse it', async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel, maxModelLen: 100_000 });
    const full = await exportTokens((await bench(server.url, await outDir(), { tasks: ['lookup-test-0'], trials: 1 })).run_dir);
    // Room for the first turn (its prompt and max_tokens), not for the second.
    const limit = (full[0]?.prompt_length ?? 0) + 200 + 10;
    server.completions.length = 0;
    const report = await bench(server.url, await outDir(), { tasks: ['lookup-test-0'], trials: 1, llm: { maxContext: limit, maxTokens: 200 } });
    const [r] = await exportTokens(report.run_dir);
    expect(r?.reason).toBe('context_limit');
    expect(r?.truncated).toBe(true);
    expect(r?.turns).toHaveLength(1);
    expect(Math.max(...server.completions.map((c) => c.prompt_token_ids.length))).toBeLessThanOrEqual(limit - 200);
  });

  it.each([
    ['tokenize', /no POST \/tokenize/],
    ['token_ids', /no 'token_ids'/],
    ['logprobs', /no 'logprobs.token_logprobs'/],
  ] as const)('refuses a server without %s before any episode', async (omit, message) => {
    await using server = await startFakeVllmServer({ reply: lookupModel, omit: [omit] });
    const out = await outDir();
    await expect(bench(server.url, out)).rejects.toMatchObject({ code: 'LLM_INCOMPATIBLE', message });
    expect(existsSync(out) && (await import('node:fs')).readdirSync(out)).toEqual([]);
  });

  it('fails the episodes in flight when the server dies, starts no more, and keeps what completed', async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel, dieAfter: 5 });
    const out = await outDir();
    const failure = bench(server.url, out, { concurrency: 1 });
    await expect(failure).rejects.toMatchObject({ code: 'LLM_UNAVAILABLE' });
    const [dir] = (await import('node:fs')).readdirSync(out);
    const runDir = path.join(out, dir as string);
    const summary = JSON.parse(await readFile(path.join(runDir, 'summary.json'), 'utf8')) as { stopped_by?: { code: string; message: string }; episodes: { finished: number; by_reason: Record<string, number> } };
    expect(summary.stopped_by?.code).toBe('LLM_UNAVAILABLE');
    expect(summary.stopped_by?.message).toMatch(/failed POST \/(tokenize|v1\/completions) 3 times/);
    // The start-up check and two episodes of two turns, then the third episode fails: the fourth never starts.
    expect(summary.episodes.by_reason).toEqual({ done: 2, policy_error: 1 });
    expect((await exportTokens(runDir)).filter((r) => r.reason === 'done')).toHaveLength(2);
    expect(existsSync(path.join(runDir, 'benchmark.json'))).toBe(true);
  });
});

/**
 * An agent program trained as it is: `--policy cmd:` starts examples/agents/openai-tools.mjs (the
 * `openai` package's tool loop, the env's tools over MCP), its Responses-API and `@anthropic-ai/sdk`
 * twins once per episode against a fake vLLM server. Every exported turn is a completion the server produced, ids and logprobs exactly;
 * streaming and not give the same records; a history the program rewrites starts a new segment;
 * a wrong key, a failing program and one that outlives its time limit end as they should.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startFakeVllmServer } from '../llm/fake-vllm-server.js';
import { startFakeLlmServer } from '../llm/fake-llm-server.js';
import { exportTokens } from '../replay/token-export.js';
import { Run } from './run.js';
import { runBenchmark } from '../eval/benchmark/benchmark.js';
import type { RunOptions } from './run-options.js';

const AGENT = path.resolve('examples/agents/openai-tools.mjs');
const ANTHROPIC_AGENT = path.resolve('examples/agents/anthropic-tools.mjs');
const RESPONSES_AGENT = path.resolve('examples/agents/openai-responses.mjs');
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'capture-'));
  dirs.push(d);
  return d;
}

/** The openai package's entry, for the programs written into temporary folders to import. */
const OPENAI = JSON.stringify(path.resolve('node_modules/openai/index.mjs'));

/** A program written into `dir`: its path. */
async function programFile(dir: string, name: string, source: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, source);
  return file;
}

/** Looks the key up, then answers with the code the lookup gave. */
function lookupModel(prompt: string): string {
  const code = [...prompt.matchAll(/"code":"(\w+)"/g)].pop()?.[1];
  if (code !== undefined) return `Found it.\n<tool_call>\n{"name": "answer", "arguments": {"code": "${code}"}}\n</tool_call>`;
  const key = [...prompt.matchAll(/the key '([a-z-]+)'/g)].pop()?.[1] ?? 'none';
  return `<tool_call>\n{"name": "lookup_code", "arguments": {"key": "${key}"}}\n</tool_call>`;
}

async function run(command: string, url: string, extra: Partial<RunOptions> = {}): Promise<{ run: Run; summary: Awaited<ReturnType<Run['execute']>> }> {
  const r = await Run.prepare({ env: 'fixtures/lookup', episodes: 2, concurrency: 2, seed: 3, out: await tmp(), policy: `cmd:${command}`, llm: { baseURL: url, tokens: true, maxTokens: 200, instruction: "What is the code behind the key 'keen-elk'?" }, ...extra });
  return { run: r, summary: await r.execute() };
}

describe('an agent program as the policy (cmd:)', () => {
  it('records each of its model calls as a token-exact turn, and its MCP calls as the steps, whichever SDK, streaming or not', async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel });
    const exported = [];
    for (const command of [`node ${AGENT}`, `node ${AGENT} --stream`, `node ${ANTHROPIC_AGENT}`, `node ${ANTHROPIC_AGENT} --stream`, `node ${RESPONSES_AGENT}`, `node ${RESPONSES_AGENT} --stream --previous`]) {
      const report = await runBenchmark({ suite: 'fixtures/lookup', tasks: ['lookup-test-1'], trials: 1, seed: 3, out: await tmp(), policy: `cmd:${command}`, llm: { baseURL: server.url, tokens: true, maxTokens: 200 } });
      expect(report.metrics.success_rate.value, command).toBe(1);
      const records = await exportTokens(report.run_dir);
      expect(records.map((r) => r.task_id)).toEqual(['lookup-test-1']);
      for (const rec of records) {
        expect(rec.turns).toHaveLength(2);
        for (const t of rec.turns) {
          const completion = server.completions.find((c) => same(rec.input_ids.slice(0, t.start), c.prompt_token_ids) && same(rec.input_ids.slice(t.start, t.end), c.token_ids) && same(rec.logprobs.slice(t.start, t.end), c.logprobs));
          expect(completion, `${command}: episode ${rec.episode}'s turn at ${t.start} is a completion the server produced`).toBeDefined();
        }
        const generated = rec.turns.reduce((n, t) => n + t.end - t.start, 0);
        expect(rec.loss_mask.filter((m) => m === 1)).toHaveLength(generated);
        // The lookup's turn earns nothing; the answer's gets the judge's late 1 and the benchmark's success.
        expect(rec.turns.map((t) => t.reward)).toEqual([0, 2]);
      }
      exported.push(records.map((rec) => ({ ids: rec.input_ids, mask: rec.loss_mask, rewards: rec.turns.map((t) => t.reward) })));
      const manifest = JSON.parse(await readFile(path.join(report.run_dir, 'run.json'), 'utf8')) as { config: { policy: string; llm: { tokens: boolean } } };
      expect(manifest.config.policy).toBe(`cmd:${command}`);
      expect(manifest.config.llm.tokens).toBe(true);
    }
    // Same seed, same conversation: neither streaming, nor the API the SDK speaks, nor a chained history changes what is recorded.
    for (const other of exported.slice(1)) expect(other).toEqual(exported[0]);
  });

  it('starts a new segment when the program rewrites its history, never re-encoding generated ids', async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel });
    const dir = await tmp();
    // After the lookup, the program forgets the conversation and asks afresh with the result in the user turn.
    const program = await programFile(
      dir,
      'compacting.mjs',
      `import OpenAI from ${OPENAI};
const openai = new OpenAI();
const tools = [{ type: 'function', function: { name: 'lookup_code', parameters: { type: 'object', properties: { key: { type: 'string' } } } } }];
const first = await openai.chat.completions.create({ model: process.env.AGENT_MODEL, messages: [{ role: 'user', content: "the key 'keen-elk'" }], tools });
const again = await openai.chat.completions.create({ model: process.env.AGENT_MODEL, messages: [{ role: 'user', content: 'Summary so far: {"code":"Y97E"}' }], tools });
console.error(first.choices[0].message.tool_calls.length, again.choices[0].message.tool_calls[0].function.name);
`,
    );
    const { run: r, summary } = await run(`node ${program}`, server.url, { episodes: 1 });
    expect(summary.episodes.by_reason).toEqual({ policy_stop: 1 });
    expect(summary.model_turns).toEqual({ total: 2, failed: 0, segments: 2, segmented_episodes: 1 });
    const records = await exportTokens(r.dir as string);
    expect(records.map((rec) => rec.segment ?? 0)).toEqual([0, 1]);
    for (const rec of records) {
      const [turn] = rec.turns;
      const completion = server.completions.find((c) => same(rec.input_ids.slice(0, turn?.start), c.prompt_token_ids) && same(rec.input_ids.slice(turn?.start, turn?.end), c.token_ids));
      expect(completion).toBeDefined();
    }
  });

  it('passes requests through as text without --tokens, recording each call as a turn without ids', async () => {
    await using server = await startFakeLlmServer((req, n) => (n === 1 ? { toolCalls: [{ name: 'lookup_code', arguments: { key: 'keen-elk' } }], inputTokens: 40, outputTokens: 9 } : { text: 'The code is Y97E.', inputTokens: 60, outputTokens: 6 }));
    const { run: r, summary } = await run(`node ${AGENT} --stream`, server.url, { episodes: 1, llm: { baseURL: `${server.url}/v1`, instruction: "What is the code behind the key 'keen-elk'?" } });
    expect(summary.episodes.by_reason).toEqual({ policy_stop: 1 });
    expect(summary.steps.total).toBe(1);
    // The program's own conversation went upstream as it sent it: the tool result in the second request.
    expect(server.requests).toHaveLength(2);
    expect(JSON.stringify(server.requests[1]?.body.messages)).toContain('Y97E');
    const events = (await readFile(path.join(r.dir as string, 'events.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; input_tokens?: number; tokens?: unknown });
    const calls = events.filter((e) => e.type === 'llm_call');
    expect(calls.map((c) => [c.input_tokens, c.tokens])).toEqual([
      [40, undefined],
      [60, undefined],
    ]);
  });

  it("fails the episode with the program's exit and stderr, and kills one that outlives its time limit with everything it started", async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel });
    const failing = await run(`echo 'no such tool' >&2; exit 3`, server.url, { episodes: 1 });
    expect(failing.summary.episodes.by_reason).toEqual({ policy_error: 1 });
    expect(failing.summary.problem ?? JSON.stringify(failing.summary)).toContain('exited with code 3: no such tool');
    const dir = await tmp();
    const marker = path.join(dir, 'child.pid');
    // The program ignores SIGTERM and leaves a child that does too.
    const stubborn = await run(`trap '' TERM; sh -c 'echo $$ > ${marker}; exec sleep 30' & sleep 30`, server.url, { episodes: 1, program: { timeoutMs: 300 } });
    expect(stubborn.summary.episodes.by_reason).toEqual({ time_limit: 1 });
    const child = Number((await readFile(marker, 'utf8')).trim());
    expect(child).toBeGreaterThan(1);
    expect(await gone(child)).toBe(true);
  });

  it("answers sub-agents that call the model in parallel at once, each conversation its own exact segment", async () => {
    // Neither sub-agent's first answer is sent before the other's request has reached the server: answered one at a time, this would never end.
    let bothAsked!: () => void;
    const asked = new Set<string>();
    const barrier = new Promise<void>((resolve) => (bothAsked = resolve));
    await using server = await startFakeVllmServer({
      reply: (prompt) => (prompt.includes('"code":') ? 'Done.' : '<tool_call>\n{"name": "lookup_code", "arguments": {"key": "keen-elk"}}\n</tool_call>'),
      gate: (prompt) => {
        const name = /sub-agent (\w)/.exec(prompt)?.[1];
        // The start-up check and the second turns go through.
        if (name === undefined || prompt.includes('"code":')) return undefined;
        asked.add(name);
        if (asked.size === 2) bothAsked();
        return barrier;
      },
    });
    const dir = await tmp();
    const program = await programFile(
      dir,
      'subagents.mjs',
      `import OpenAI from ${OPENAI};
const openai = new OpenAI();
const model = process.env.AGENT_MODEL;
const subAgent = async (name) => {
  const messages = [{ role: 'user', content: 'You are sub-agent ' + name + '.' }];
  const first = (await openai.chat.completions.create({ model, messages })).choices[0].message;
  messages.push(first, { role: 'tool', tool_call_id: 'x', content: '{"code":"Y97E"}' });
  await openai.chat.completions.create({ model, messages });
};
await Promise.all([subAgent('A'), subAgent('B')]);
`,
    );
    const { run: r, summary } = await run(`node ${program}`, server.url, { episodes: 1 });
    expect(summary.episodes.by_reason).toEqual({ policy_stop: 1 });
    expect(summary.model_turns).toMatchObject({ total: 4, failed: 0, segments: 2, segmented_episodes: 1 });
    const records = await exportTokens(r.dir as string);
    expect(records.map((rec) => [rec.segment ?? 0, rec.turns.length])).toEqual([
      [0, 2],
      [1, 2],
    ]);
    for (const rec of records) {
      for (const t of rec.turns) expect(server.completions.some((c) => same(rec.input_ids.slice(0, t.start), c.prompt_token_ids) && same(rec.input_ids.slice(t.start, t.end), c.token_ids))).toBe(true);
    }
  });

  it('ends a program that floods the model at its turn limit: the call past it refused with a 400 the SDK raises, the episode truncated max_turns', async () => {
    await using server = await startFakeVllmServer({ reply: () => 'Thinking.' });
    const dir = await tmp();
    const said = path.join(dir, 'said.json');
    // It ignores SIGTERM so that what the SDK raised is written down before it goes.
    const program = await programFile(
      dir,
      'flood.mjs',
      `import OpenAI from ${OPENAI};
import { writeFileSync } from 'node:fs';
process.on('SIGTERM', () => {});
const openai = new OpenAI({ maxRetries: 0 });
for (;;) {
  try {
    await openai.chat.completions.create({ model: process.env.AGENT_MODEL, messages: [{ role: 'user', content: 'Go on.' }] });
  } catch (err) {
    writeFileSync(process.argv[2], JSON.stringify({ status: err.status, type: err.type, message: err.message }));
    process.exit(0);
  }
}
`,
    );
    const { run: r, summary } = await run(`node ${program} ${said}`, server.url, { episodes: 1, program: { maxTurns: 3 } });
    expect(summary.episodes.by_reason).toEqual({ max_turns: 1 });
    expect(summary.model_turns).toMatchObject({ total: 3, failed: 0 });
    expect(server.completions).toHaveLength(4); // the start-up check and three turns
    const error = JSON.parse(await readFile(said, 'utf8')) as { status: number; type: string; message: string };
    expect(error).toMatchObject({ status: 400, type: 'turn_limit_reached' });
    expect(error.message).toContain('its 3 model calls');
    const episode = JSON.parse((await readFile(path.join(r.dir as string, 'episodes.jsonl'), 'utf8')).split('\n')[0] as string) as { reason: string; truncated: boolean };
    expect(episode).toMatchObject({ reason: 'max_turns', truncated: true });
  });

  it("fails the episode with the inference server's error when it dies under a program, answering the program a well-formed 502, and starts no more", async () => {
    // One completion for the start-up check, one for the first episode's first turn; then the server is gone.
    await using server = await startFakeVllmServer({ reply: lookupModel, dieAfter: 2 });
    const { summary } = await run(`node ${AGENT}`, server.url, { episodes: 3, concurrency: 1 });
    expect(summary.episodes.by_reason).toEqual({ policy_error: 1 });
    expect(summary.stopped_by?.code).toBe('LLM_UNAVAILABLE');
    expect(summary.model_turns).toMatchObject({ total: 2, failed: 1 });
  });

  it('answers a wrong key with a 401 in the shape of the API called, and refuses an unknown model naming the served one', async () => {
    await using server = await startFakeVllmServer({ reply: lookupModel });
    const dir = await tmp();
    const program = await programFile(
      dir,
      'probe.mjs',
      `const base = process.env.OPENAI_BASE_URL;
const post = (key, body) => fetch(base + '/chat/completions', { method: 'POST', headers: { authorization: 'Bearer ' + key, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(async (r) => [r.status, await r.json()]);
const wrong = await post('0'.repeat(32), { model: process.env.AGENT_MODEL, messages: [{ role: 'user', content: 'hi' }] });
const model = await post(process.env.OPENAI_API_KEY, { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
const malformed = await post(process.env.OPENAI_API_KEY, { model: process.env.AGENT_MODEL, messages: [{ role: 'robot', content: 'hi' }] });
const anthropic = await fetch(process.env.ANTHROPIC_BASE_URL + '/v1/messages', { method: 'POST', headers: { 'x-api-key': 'f'.repeat(32), 'content-type': 'application/json' }, body: JSON.stringify({ model: process.env.AGENT_MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }) }).then(async (r) => [r.status, await r.json()]);
await (await import('node:fs/promises')).writeFile(process.argv[2], JSON.stringify({ wrong, model, malformed, anthropic }));
`,
    );
    const answers = path.join(dir, 'answers.json');
    const { summary } = await run(`node ${program} ${answers}`, server.url, { episodes: 1 });
    expect(summary.episodes.by_reason).toEqual({ policy_stop: 1 });
    const said = JSON.parse(await readFile(answers, 'utf8')) as Record<string, [number, { error: { message: string; type: string; param: string | null } }]>;
    expect(said['wrong']?.[0]).toBe(401);
    expect(said['wrong']?.[1].error.message).toMatch(/opens no running episode/);
    expect(said['model']?.[0]).toBe(404);
    expect(said['model']?.[1].error.message).toContain("serves 'fake-model'");
    expect(said['malformed']?.[0]).toBe(400);
    expect(said['malformed']?.[1].error.param).toBe('messages[0].role');
    // Anthropic's SDK reads Anthropic's shape.
    expect(said['anthropic']).toEqual([401, { type: 'error', error: { type: 'authentication_error', message: expect.stringMatching(/opens no running episode/) } }]);
  });
});

function same(a: readonly (number | null)[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** Whether `pid` is dead (gone, or a zombie waiting to be reaped), within a second: a SIGKILL takes effect asynchronously. */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    if (stat === '' || /\) Z /.test(stat)) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

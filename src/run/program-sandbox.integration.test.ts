/**
 * An agent program in its env's sandbox (code/python-repair declares one): it runs in the episode's
 * workspace (the env's tools see what it writes), reaches the capture endpoint and nothing else,
 * sees neither the host's secrets nor its services, and repairs a task as any program would.
 * Needs bubblewrap (in CI its absence fails the suite).
 */
import { readFile, rm, mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runBenchmark } from '../eval/benchmark/benchmark.js';
import { startFakeVllmServer } from '../llm/fake-vllm-server.js';
import { bwrapForTests } from '../sandbox/bwrap-testing.js';
import { Run } from './run.js';

const available = bwrapForTests('the agent-program sandbox tests');
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'program-sandbox-'));
  dirs.push(d);
  return d;
}

interface Task {
  readonly id: string;
  readonly actions: readonly { readonly name: string; readonly params: Record<string, string> }[];
}
const gold = (JSON.parse((await readFile('fixtures/code/python-repair/tasks/test.jsonl', 'utf8')).split('\n')[0] as string) as Task).actions[0]?.params as { path: string; content: string };

/** Writes the known fix, submits, then says it is done. */
function repairModel(prompt: string): string {
  if (prompt.includes('hidden tests pass')) return 'Submitted.';
  if (prompt.includes(`bytes to ${gold.path}`)) return '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>';
  return `<tool_call>\n${JSON.stringify({ name: 'write_file', arguments: gold })}\n</tool_call>`;
}

describe.skipIf(!available)('an agent program in its env sandbox', () => {
  it('repairs a task through the env’s tools, its command line’s relative paths resolved from where agent was started', async () => {
    await using server = await startFakeVllmServer({ reply: repairModel });
    const report = await runBenchmark({ suite: 'code/python-repair', tasks: ['python-repair-0'], out: await tmp(), policy: 'cmd:node examples/agents/openai-tools.mjs', llm: { baseURL: server.url, tokens: true, maxTokens: 400 } });
    // submit ends the episode: done.
    expect(report.tasks[0]?.trials[0]).toMatchObject({ success: true, reward: 1, reason: 'done' });
  });

  it('runs in the episode workspace, reaches the endpoint and nothing else of the host', async () => {
    await using server = await startFakeVllmServer({ reply: () => 'nothing to do' });
    const program = path.join(await tmp(), 'probe.mjs');
    await writeFile(
      program,
      `import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
const raw = await new Promise((resolve) => { const s = net.connect(6379, '127.0.0.1'); s.on('connect', () => { s.destroy(); resolve('redis reachable'); }); s.on('error', (e) => resolve(e.code)); });
const models = await fetch(process.env.OPENAI_BASE_URL + '/models', { headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY } }).then((r) => r.status, (e) => String(e));
writeFileSync('note.txt', 'from the program');
const seen = [process.cwd(), existsSync('stats_utils.py'), existsSync('/etc/shadow'), existsSync(${JSON.stringify(path.resolve('package.json'))}), raw, models, readFileSync('note.txt', 'utf8')];
console.error(seen.join(' | '));
process.exit(3);
`,
    );
    const run = await Run.prepare({ env: 'code/python-repair', episodes: 1, out: await tmp(), policy: `cmd:node ${program}`, llm: { baseURL: server.url, tokens: true } });
    const summary = await run.execute();
    expect(summary.episodes.by_reason).toEqual({ policy_error: 1 });
    // The workspace (seeded with the task's files), no host secret, the project read-only, no Redis, the model endpoint.
    expect(summary.problem).toContain(`the agent program exited with code 3: /workspace | true | false | true | ECONNREFUSED | 200 | from the program`);
    expect(run.config.sandbox).toMatchObject({ mode: 'isolated' });
  });
});

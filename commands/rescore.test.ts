/**
 * `agent rescore`: a finished benchmark run of the lookup suite (its judge gave every gold answer 1)
 * rescored with a stricter judge flips exactly the episodes that judge refuses, into a new reward
 * log version; the run's own log and its export do not change; rescoring with the env's own judge
 * changes nothing; bad input is refused naming what to pass.
 */
import { existsSync } from 'node:fs';
import { cp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { startFakeLlmServer } from '../src/llm/fake-llm-server.js';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(async () => {
  vi.unstubAllEnvs();
  await tmp.cleanup();
});

interface Report {
  readonly version: number;
  readonly sources: string[];
  readonly evaluations: { arrived: number; failed: number };
  readonly episodes: number;
  readonly changed: { episode: number; before: number; after: number }[];
}

/** Each episode's return in `agent export` (its judge's values and the benchmark's verdict). */
async function returns(dir: string, ...flags: string[]): Promise<Map<number, number>> {
  const { code, stdout, stderr } = await runAgent(['export', dir, ...flags]);
  expect(code, stderr).toBe(0);
  const out = new Map<number, number>();
  for (const line of stdout.trim().split('\n')) {
    const r = JSON.parse(line) as { episode: number; reward: number | null };
    out.set(r.episode, (out.get(r.episode) ?? 0) + (r.reward ?? 0));
  }
  return out;
}

describe('agent rescore', () => {
  it('flips the verdicts a stricter judge refuses, and nothing else, into a new reward log version', async () => {
    const out = await tmp.dir('rescore-');
    const bench = await runAgent(['benchmark', 'fixtures/lookup', '--policy', 'gold', '--out', out, '--json']);
    expect(bench.code, bench.stderr).toBe(0);
    const { run_dir: dir, tasks } = JSON.parse(bench.stdout) as { run_dir: string; tasks: { id: string; trials: { episode: number }[] }[] };
    // The stricter judge: an answer about a key that starts with 'k' or 'p' is wrong.
    const strict = path.join(out, 'strict.mjs');
    await writeFile(strict, "export function strict({ action, params, state_before: s }) {\n  if (action !== 'answer') return 0;\n  return /^[kp]/.test(s.asked) ? 0 : params.code === s.codes[s.asked] ? 1 : 0;\n}\n");
    const keys = new Map((await readFile('fixtures/lookup/tasks/test.jsonl', 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { id: string; instruction: string }).map((t) => [t.id, /the key '([a-z-]+)'/.exec(t.instruction)?.[1] ?? '']));
    const refused = tasks.filter((t) => /^[kp]/.test(keys.get(t.id) ?? '')).map((t) => t.trials[0]?.episode as number).sort((a, b) => a - b);
    expect(refused.length).toBeGreaterThan(0);
    const ownLog = await readFile(path.join(dir, 'rewards.jsonl'), 'utf8');
    const before = await returns(dir);

    const rescored = await runAgent(['rescore', dir, '--evaluator', `judge=${strict}#strict`, '--json']);
    expect(rescored.code, rescored.stderr).toBe(0);
    const report = JSON.parse(rescored.stdout) as Report;
    expect(report).toMatchObject({ version: 2, sources: ['judge'], evaluations: { arrived: 20, failed: 0 }, episodes: 10 });
    expect(report.changed.map((c) => c.episode)).toEqual(refused);
    expect(report.changed.every((c) => c.before - c.after === 1)).toBe(true);
    // The run's own log, and what its export counts, are as they were; version 2 differs exactly there.
    expect(await readFile(path.join(dir, 'rewards.jsonl'), 'utf8')).toBe(ownLog);
    expect(await returns(dir)).toEqual(before);
    const after = await returns(dir, '--reward-version', '2');
    for (const [episode, r] of before) expect(after.get(episode), `episode ${episode}`).toBe(refused.includes(episode) ? r - 1 : r);

    // The env's own judge again: a third version, the same returns as the run's own.
    const again = await runAgent(['rescore', dir, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ version: 3, changed: [] });
    expect(await returns(dir, '--reward-version', '3')).toEqual(before);
    const text = await runAgent(['rescore', dir, '--source', 'judge']);
    expect(text.stdout).toContain('0 of 10 episodes changed return');
    expect(text.stdout).toContain(`agent export ${dir} --reward-version 4`);

    // Bad input: named, with what to pass; nothing written.
    const noSource = await runAgent(['rescore', dir, '--source', 'nosuch']);
    expect([noSource.code, noSource.stderr]).toEqual([2, expect.stringContaining("the env has no reward source 'nosuch'")]);
    const noVersion = await runAgent(['export', dir, '--reward-version', '9']);
    expect([noVersion.code, noVersion.stderr]).toEqual([2, expect.stringContaining('Its versions: 1, 2, 3, 4')]);
    const missing = await runAgent(['rescore', dir, '--evaluator', `judge=${path.join(out, 'missing.mjs')}`]);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringContaining('cannot load it')]);
    const noFunction = await runAgent(['rescore', dir, '--evaluator', `judge=${strict}#nosuch`]);
    expect([noFunction.code, noFunction.stderr]).toEqual([2, expect.stringContaining("the module has no function 'nosuch'")]);
    // An evaluator that fails on every step: nothing written.
    const broken = path.join(out, 'broken.mjs');
    await writeFile(broken, "export function judge() { throw new Error('the model is down'); }\n");
    const failing = await runAgent(['rescore', dir, '--evaluator', `judge=${broken}`]);
    expect([failing.code, failing.stderr]).toEqual([1, expect.stringContaining('every evaluation failed (20); nothing was written')]);
    expect(failing.stderr).toContain('the model is down');
    expect(existsSync(path.join(dir, 'rewards.v5.jsonl'))).toBe(false);
    const badSpec = await runAgent(['rescore', dir, '--evaluator', 'judge']);
    expect([badSpec.code, badSpec.stderr]).toEqual([2, expect.stringContaining('expected <source>=<module>[#<function>]')]);
    expect(JSON.parse(await readFile(path.join(dir, 'rescore.v2.json'), 'utf8'))).toMatchObject({ version: 2, evaluators: { judge: { module: strict, exportName: 'strict' } } });
  });

  it('asks another judge model with --judge: the prompt kept, the new model\'s scores in the new version', async () => {
    vi.stubEnv('OPENAI_API_KEY', 'test-key');
    // The run's judge model says 1 to every answer; the one rescoring says 0.
    await using fake = await startFakeLlmServer((req) => ({ text: `score: ${req.body.model === 'strict-model' ? 0 : 1}` }));
    const env = path.join(await tmp.dir('rescore-judge-'), 'lookup');
    await cp('fixtures/lookup', env, { recursive: true });
    await writeFile(path.join(env, 'judge-prompt.md'), 'The user asked for the code of {{state_before.asked}}; the agent answered {{params.code}}. Give a score from 0 to 1.\n');
    const manifest = JSON.parse(await readFile(path.join(env, 'env.json'), 'utf8')) as { reward_sources: Record<string, unknown> };
    manifest.reward_sources = { judge: { judge: { provider: 'openai', model: 'lenient-model', prompt: 'judge-prompt.md', base_url: `${fake.url}/v1`, when: "action == 'answer'" } } };
    await writeFile(path.join(env, 'env.json'), JSON.stringify(manifest));
    const bench = await runAgent(['benchmark', env, '--policy', 'gold', '--tasks', 'lookup-test-0,lookup-test-1', '--out', path.join(env, 'runs'), '--json']);
    expect(bench.code, bench.stderr).toBe(0);
    const dir = (JSON.parse(bench.stdout) as { run_dir: string }).run_dir;
    const asked = fake.requests.length;
    const rescored = await runAgent(['rescore', dir, '--judge', 'llm:strict-model', '--llm-base-url', `${fake.url}/v1`, '--json']);
    expect(rescored.code, rescored.stderr).toBe(0);
    expect(JSON.parse(rescored.stdout)).toMatchObject({ version: 2, evaluations: { arrived: 2 }, changed: [{ before: 1, after: 0 }, { before: 1, after: 0 }] });
    const calls = fake.requests.slice(asked);
    expect(calls.map((r) => r.body.model)).toEqual(['strict-model', 'strict-model']);
    expect(JSON.stringify(calls[0]?.body.messages)).toContain('the agent answered');
    const refused = await runAgent(['rescore', dir, '--judge', 'strict-model']);
    expect([refused.code, refused.stderr]).toEqual([2, expect.stringContaining('expected llm:<model>')]);
  });
});

/** `agent benchmark` on the tau-bench port: gold scores every task, random almost none, and a planted regression fails the gate. */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { validate } from '../src/internal.js';
import { metaSchema } from '../src/schema/meta-schemas.js';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());
const RETAIL = 'fixtures/tau-bench/retail';

interface Report {
  run_dir: string;
  metrics: { success_rate: { value: number; ci_low: number; ci_high: number }; reward: { value: number }; pass_hat_k: Record<string, number>; tool_success_rate: { value: number } };
  tasks: { id: string; trials: { success: boolean; reward: number; checks?: { state_match: boolean }; cost?: object; metrics?: Record<string, number> }[] }[];
}

async function bench(args: string[]): Promise<{ code: number; report: Report; stdout: string; stderr: string }> {
  const out = await tmp.dir('bench-');
  const r = await runAgent(['benchmark', ...args, '--out', out, '--format', 'json']);
  return { ...r, report: JSON.parse(r.stdout) as Report };
}

describe('agent benchmark', () => {
  it.each([
    ['fixtures/tau-bench/airline', 50],
    [RETAIL, 115],
  ])('--policy gold scores every task of %s (%i)', async (suite, n) => {
    const { code, report } = await bench([suite, '--policy', 'gold']);
    expect(code).toBe(0);
    expect(report.tasks).toHaveLength(n);
    expect(report.tasks.filter((t) => !t.trials[0]?.success).map((t) => t.id)).toEqual([]);
    expect(report.metrics.success_rate).toEqual({ value: 1, ci_low: 1, ci_high: 1 });
    // benchmark.json beside the run, valid against its schema.
    const saved = JSON.parse(await readFile(path.join(report.run_dir, 'benchmark.json'), 'utf8')) as unknown;
    expect(validate(metaSchema('benchmark-report'), saved)).toEqual([]);
    // And the page a person reads: charts drawn offline into the file.
    const html = await readFile(path.join(report.run_dir, 'benchmark.html'), 'utf8');
    expect(html.match(/<svg/g)?.length).toBeGreaterThanOrEqual(2);
    expect(html).not.toMatch(/<script/);
    // Legible at this size: task names off the axis (the failed ones are listed), one reward said rather than drawn as one block, no cost said.
    expect(html).toContain(`${n} tasks, by share of trials passed (failed ones listed below)`);
    expect(html).toContain(`<p>every episode's reward is 0 (${n} episodes)</p>`);
    expect(html).toContain('<h2>Cost per episode</h2><p>no priced calls');
  });

  it("counts each episode's delayed reward once it has landed: lookup's judge answers after the episode ends", async () => {
    const { code, report } = await bench(['lookup', '--policy', 'gold']);
    expect(code).toBe(0);
    const rewards = report.tasks.map((t) => t.trials[0]?.reward);
    expect(rewards).toEqual(Array(10).fill(1));
    expect(report.metrics.reward.value).toBe(1);
  });

  it('--policy random scores almost nothing, with pass^k for each k; a metric module adds its own', async () => {
    const metric = path.join(await tmp.dir('metric-'), 'calls_per_success.mjs');
    await writeFile(metric, 'export default (episode) => ({ one: 1, respond_calls: episode.steps.filter((s) => s.action === "respond").length });\n');
    const { report } = await bench([RETAIL, '--policy', 'random', '--trials', '2', '--seed', '1', '--metric', metric]);
    const custom = (report.metrics as unknown as { custom: Record<string, { value: number; ci_low: number; ci_high: number }> }).custom;
    expect(custom['calls_per_success.one']).toEqual({ value: 1, ci_low: 1, ci_high: 1 });
    expect(custom['calls_per_success.respond_calls']?.ci_low).toBeLessThanOrEqual(custom['calls_per_success.respond_calls']?.value as number);
    // Each episode keeps its own values (what `agent export --verdict` makes a reward), valid against the report's schema.
    const trials = report.tasks.flatMap((t) => t.trials);
    expect(trials.map((x) => Object.keys(x.metrics ?? {}))).toEqual(trials.map(() => ['calls_per_success.one', 'calls_per_success.respond_calls']));
    expect(validate(metaSchema('benchmark-report'), JSON.parse(await readFile(path.join(report.run_dir, 'benchmark.json'), 'utf8')) as unknown)).toEqual([]);
    // Random changes (almost) nothing, so it scores the floor: the tasks whose gold leaves the database as it was.
    expect(report.metrics.success_rate.value).toBeLessThan(0.15);
    expect(report.metrics.success_rate.value).toBeCloseTo((report.metrics as unknown as { do_nothing_floor: number }).do_nothing_floor, 1);
    expect(Object.keys(report.metrics.pass_hat_k)).toEqual(['1', '2']);
    expect(report.metrics.pass_hat_k['2']).toBeLessThanOrEqual(report.metrics.pass_hat_k['1'] as number);
    expect(report.metrics.tool_success_rate.value).toBeLessThan(0.5);
  });

  it('--metric <url> asks a metric service for each episode (a 503 is retried) and aggregates its answers', async () => {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const episode = JSON.parse(body) as { task: string; steps: unknown[]; success: boolean };
        seen.push(episode.task);
        // The first call meets a busy service: the benchmark retries it.
        if (seen.length === 1) return void res.writeHead(503).end('busy');
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ steps: episode.steps.length, solved: episode.success ? 1 : 0 }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/quality`;
      const { code, report } = await bench([RETAIL, '--policy', 'gold', '--tasks', 'retail-test-0,retail-test-1', '--metric', url]);
      expect(code).toBe(0);
      const custom = (report.metrics as unknown as { custom: Record<string, { value: number }> }).custom;
      expect(custom['quality.solved']?.value).toBe(1);
      expect(custom['quality.steps']?.value).toBeGreaterThan(0);
      expect(seen.sort()).toEqual(['retail-test-0', 'retail-test-0', 'retail-test-1']);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('fails the gate on a planted regression, names the tasks that flipped, and passes within the allowed drop', async () => {
    const tasks = ['retail-test-0', 'retail-test-1', 'retail-test-2', 'retail-test-3', 'retail-test-4', 'retail-test-5', 'retail-test-6', 'retail-test-7'];
    const base = await bench([RETAIL, '--policy', 'gold', '--tasks', tasks.join(',')]);
    const baseline = path.join(await tmp.dir('baseline-'), 'benchmark.json');
    await writeFile(baseline, JSON.stringify(base.report));
    // Gold, except that it stops before the last gold action of every other task.
    const policy = path.join(await tmp.dir('policy-'), 'sabotaged.mjs');
    const file = path.resolve(RETAIL, 'tasks', 'test.jsonl');
    await writeFile(
      policy,
      `import { readFileSync } from 'node:fs';
const gold = new Map(readFileSync(${JSON.stringify(file)}, 'utf8').trim().split('\\n').map((l) => JSON.parse(l)).map((t) => [t.id, t]));
export default function sabotaged(obs) {
  const t = gold.get(obs.task.id);
  const n = Number(t.id.split('-').pop()) % 2 === 0 ? t.actions.length - 1 : t.actions.length;
  const a = obs.step < n ? t.actions[obs.step] : null;
  if (a) return { name: a.name, params: a.params };
  return obs.step === n && t.outputs.length > 0 ? { name: 'respond', params: { content: t.outputs.join(' ') } } : null;
}
`,
    );
    const out = await tmp.dir('bench-');
    // A baseline that cannot be read, or is not a report, fails before the first episode: nothing runs.
    const missing = await runAgent(['benchmark', RETAIL, '--policy', policy, '--baseline', path.join(out, 'nope.json'), '--out', out]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/error: cannot read the baseline '.*nope\.json': .*ENOENT/);
    await writeFile(path.join(out, 'foreign.json'), '{"hello": 1}');
    const foreign = await runAgent(['benchmark', RETAIL, '--policy', policy, '--baseline', path.join(out, 'foreign.json'), '--out', out]);
    expect(foreign.stderr).toMatch(/is not a benchmark report/);
    expect((await readdir(out)).filter((f) => !f.endsWith('.json'))).toEqual([]);
    const failed = await runAgent(['benchmark', RETAIL, '--policy', policy, '--tasks', tasks.join(','), '--baseline', baseline, '--out', out]);
    expect(failed.code).toBe(1);
    // The comparison is saved with the report, and shown on its page.
    const [runDir] = (await readdir(out)).filter((f) => !f.endsWith('.json'));
    const saved = JSON.parse(await readFile(path.join(out, runDir as string, 'benchmark.json'), 'utf8')) as { baseline?: { regressed: boolean; flipped: unknown[] } };
    expect(saved.baseline).toMatchObject({ regressed: true, flipped: expect.arrayContaining([{ id: 'retail-test-0', trial: 0, now: false, before: true }]) });
    expect(validate(metaSchema('benchmark-report'), saved)).toEqual([]);
    const page = await readFile(path.join(out, runDir as string, 'benchmark.html'), 'utf8');
    expect(page).toMatch(/Against baseline <code>.*benchmark\.json<\/code>: <span style="color:#d62728">regressed<\/span>/);
    expect(page).toContain('<td>retail-test-0</td><td>0</td><td style="color:#d62728">passed → fails</td>');
    expect(failed.stdout).toMatch(/success_rate +0\.500 vs 1\.000: -0\.500 .*REGRESSION \(allowed 0\)/);
    expect(failed.stdout).toMatch(/flipped: retail-test-0#0 pass→fail, retail-test-2#0 pass→fail, retail-test-4#0 pass→fail, retail-test-6#0 pass→fail/);
    expect(failed.stdout).toMatch(/^gate: FAILED$/m);
    expect(failed.stdout).toMatch(/win rate +0\.250 .*: 0 wins, 4 losses, 4 ties/);
    const md = await runAgent(['benchmark', RETAIL, '--policy', policy, '--tasks', tasks.join(','), '--baseline', baseline, '--out', out, '--format', 'markdown']);
    expect(md.stdout).toContain('Tasks that now fail: `retail-test-0`, `retail-test-2`, `retail-test-4`, `retail-test-6`');
    const gh = await runAgent(['benchmark', RETAIL, '--policy', policy, '--tasks', tasks.join(','), '--baseline', baseline, '--out', out, '--format', 'github']);
    expect(gh.stdout).toMatch(/^::error title=task now fails::retail-test-0 \(trial 0\)$/m);
    const junit = await runAgent(['benchmark', RETAIL, '--policy', policy, '--tasks', tasks.join(','), '--out', out, '--format', 'junit']);
    expect(junit.stdout).toMatch(/<testsuite name="tau-bench retail test \([^)]*\)" tests="8" failures="4"/);
    const allowed = await runAgent(['benchmark', RETAIL, '--policy', policy, '--tasks', tasks.join(','), '--baseline', baseline, '--max-regression', 'success_rate=0.9', '--out', out]);
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toMatch(/^gate: passed$/m);
  });

  it("counts the declared cost of paid tools in each episode's cost", async () => {
    const suite = await tmp.dir('paid-');
    const { mkdir } = await import('node:fs/promises');
    await writeFile(path.join(suite, 'env.json'), JSON.stringify({ state: { type: 'object', properties: { n: { type: 'integer' } } }, actions: [{ name: 'lookup', parameters: { type: 'object' } }], module: 'tools.mjs', initial_states: [{ n: 0 }], tools: { lookup: { cost_usd: 0.002 } } }));
    await writeFile(path.join(suite, 'tools.mjs'), "export const lookup = (_p, ctx) => ({ observation: 'ok', patch: [{ op: 'replace', path: '/n', value: ctx.state.n + 1 }] });\n");
    await mkdir(path.join(suite, 'tasks'));
    await writeFile(path.join(suite, 'tasks', 'test.jsonl'), `${JSON.stringify({ id: 'three', instruction: 'look up three times', actions: Array.from({ length: 3 }, () => ({ name: 'lookup', params: {} })) })}\n`);
    const { code, report } = await bench([suite, '--policy', 'gold']);
    expect(code).toBe(0);
    expect(report.tasks[0]?.trials[0]).toMatchObject({ success: true, cost: { usd: 0.006, tool_usd: 0.006, input_tokens: 0 } });
  });

  it('refuses a bad task file naming the line and field, and an unknown split or task', async () => {
    const suite = await tmp.dir('suite-');
    await writeFile(path.join(suite, 'env.json'), JSON.stringify({ state: { type: 'object' }, actions: [{ name: 'noop', parameters: { type: 'object' } }], module: 'tools.mjs', initial_states: [{}] }));
    await writeFile(path.join(suite, 'tools.mjs'), 'export const noop = () => ({ observation: null });\n');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(path.join(suite, 'tasks'));
    await writeFile(path.join(suite, 'tasks', 'test.jsonl'), `${JSON.stringify({ id: 'a', instruction: 'x', actions: [{ name: 'noop', params: {} }] })}\n${JSON.stringify({ id: 'a', instruction: 3, actions: [{ params: {} }] })}\n`);
    const bad = await runAgent(['benchmark', suite]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/test\.jsonl:2.*\/instruction: must be a string/s);
    expect(bad.stderr).toMatch(/\/actions\/0: must be \{name: string, params: object\}/);
    expect(bad.stderr).toMatch(/\/id: duplicate task id 'a'/);
    // Latin-1 bytes in an instruction: named by file and line, not read as U+FFFD.
    const good = `${JSON.stringify({ id: 'a', instruction: 'x', actions: [] })}\n`;
    await writeFile(path.join(suite, 'tasks', 'test.jsonl'), Buffer.concat([Buffer.from(good), Buffer.from('{"id":"b","instruction":"caf'), Buffer.from([0xe9]), Buffer.from('","actions":[]}\n')]));
    const latin1 = await runAgent(['benchmark', suite]);
    expect(latin1.code).toBe(2);
    expect(latin1.stderr).toMatch(/error: .*test\.jsonl:2 is not valid UTF-8/);
    // A suite is a folder or a built-in name; anything else says where it looked.
    const nowhere = await runAgent(['benchmark', 'tau-bench/nope']);
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toMatch(/no suite 'tau-bench\/nope': it is neither a folder \(looked at .*\) nor a suite shipped with the toolkit \(tau-bench\/airline, tau-bench\/retail, tau2-bench\/mock, tau2-bench\/airline, tau2-bench\/retail, tau2-bench\/telecom, lookup, code\/python-repair\)/);
    const listed = JSON.parse((await runAgent(['benchmark', '--list', '--json'])).stdout) as { name: string; tasks: number }[];
    expect(listed.map((l) => [l.name, l.tasks])).toEqual([
      ['tau-bench/airline', 50],
      ['tau-bench/retail', 115],
      ['tau2-bench/mock', 10],
      ['tau2-bench/airline', 20],
      ['tau2-bench/retail', 40],
      ['tau2-bench/telecom', 40],
      ['lookup', 10],
      ['code/python-repair', 33],
    ]);
    const split = await runAgent(['benchmark', RETAIL, '--split', 'dev']);
    expect(split.code).toBe(2);
    expect(split.stderr).toMatch(/has no split 'dev'/);
    const task = await runAgent(['benchmark', RETAIL, '--tasks', 'nope']);
    expect(task.code).toBe(2);
    expect(task.stderr).toMatch(/no task 'nope' in split 'test'/);
  });
});

import { execa } from 'execa';
import { cp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { validate } from '../src/internal.js';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

const agent = runAgent;

const V1 = 'fixtures/weather';
const V2 = 'fixtures/schema-pairs/weather-v2';

describe('agent schema-diff', () => {
  it('exits 0 when nothing breaks and 1 when something does', async () => {
    expect((await agent(['schema-diff', V1, V1])).code).toBe(0);
    const r = await agent(['schema-diff', V1, V2]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('NOT compatible: 4 breaking, 1 warning, 3 info');
    expect(r.stdout.indexOf('\nstate')).toBeLessThan(r.stdout.indexOf('\naction get_weather'));
  });

  it('--fail-on moves the bar', async () => {
    expect((await agent(['schema-diff', V2, V2, '--fail-on', 'info'])).code).toBe(0);
    const add = await agent(['schema-diff', 'fixtures/realworld/tau-bench-airline-tools.json', 'fixtures/realworld/tau2-bench-airline-tools.json', '--fail-on', 'info']);
    expect(add.code).toBe(1);
  });

  it('--format json matches its schema, and every breaking finding has a witness', async () => {
    const { stdout } = await agent(['schema-diff', V1, V2, '--format', 'json']);
    const report = JSON.parse(stdout) as { findings: { severity: string; witness?: unknown }[] };
    const schema = JSON.parse(await readFile('schemas/schema-diff-report.schema.json', 'utf8')) as Record<string, unknown>;
    expect(validate(schema, report)).toEqual([]);
    expect(report.findings.filter((f) => f.severity === 'breaking').every((f) => f.witness !== undefined)).toBe(true);
  });

  it('--json is --format json (every command takes --json for machine output)', async () => {
    const [json, format] = await Promise.all([agent(['schema-diff', V1, V2, '--json']), agent(['schema-diff', V1, V2, '--format', 'json'])]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse(format.stdout));
    for (const command of ['run', 'schema-diff', 'fuzz', 'doctor', 'reward', 'benchmark', 'debug', 'worker']) {
      expect((await agent([command, '--help'])).stdout, command).toMatch(/^\s+--json\b/m);
    }
  });

  it('--format markdown states plainly whether the change is compatible', async () => {
    expect((await agent(['schema-diff', V1, V2, '--format', 'markdown'])).stdout).toMatch(/^### ❌ Schema change breaks consumers\n\n\*\*4 breaking\*\*/);
    expect((await agent(['schema-diff', V1, V1, '--format', 'markdown'])).stdout).toMatch(/^### ✅ Schema change is compatible/);
  });

  it('--format github writes workflow annotations', async () => {
    const { stdout } = await agent(['schema-diff', V1, V2, '--format', 'github']);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('::error '))).toHaveLength(4);
    expect(lines.find((l) => l.includes('string-length-min-raised'))).toMatch(/^::error file=fixtures\/schema-pairs\/weather-v2\/action_schema\.json,title=string-length-min-raised \/actions\/get_weather\/properties\/city\/minLength::minLength 0 → 2/);
  });

  it('--format sarif writes SARIF 2.1.0 with a rule per id', async () => {
    const sarif = JSON.parse((await agent(['schema-diff', V1, V2, '--format', 'sarif'])).stdout) as {
      version: string;
      runs: { tool: { driver: { name: string; informationUri: string; version: string; rules: { id: string; shortDescription: { text: string } }[] } }; results: { ruleId: string; ruleIndex: number; level: string }[] }[];
    };
    expect(sarif.version).toBe('2.1.0');
    // The producer as the package says it is: its version and its homepage, so code scanning links somewhere real.
    const pkg = JSON.parse(await readFile('package.json', 'utf8')) as { version: string; homepage: string };
    expect(sarif.runs[0]?.tool.driver).toMatchObject({ name: 'agent schema-diff', version: pkg.version, informationUri: pkg.homepage });
    const run = sarif.runs[0];
    expect(run?.results.filter((r) => r.level === 'error')).toHaveLength(4);
    for (const r of run?.results ?? []) expect(run?.tool.driver.rules[r.ruleIndex]?.id).toBe(r.ruleId);
    expect(run?.tool.driver.rules.find((r) => r.id === 'maximum-raised')?.shortDescription.text).toBe('the upper bound is higher or gone');
  });

  it('an ignore file silences findings until it expires, and reports entries that matched nothing', async () => {
    const dir = await tmp.dir('agent-ignore-');
    const file = path.join(dir, 'schema-diff.ignore');
    await writeFile(
      file,
      [
        '# rule-id  location  until  reason',
        'reward-source-removed /rewards/api_latency - latency is now logged, not rewarded',
        'maximum-raised /rewards/llm_score/maximum 2099-01-01 judge rescaled to 0..10; trainers updated',
        'enabled-if-narrowed /actions/get_weather/enabled_if 2020-01-01 expired long ago',
        'required-added /state/nope - matches nothing',
      ].join('\n'),
    );
    const r = await agent(['schema-diff', V1, V2, '--ignore', file, '--format', 'json']);
    const report = JSON.parse(r.stdout) as { counts: { breaking: number }; ignored: { rule: string }[]; unused_ignores: { line: number }[]; expired_ignores: { line: number }[] };
    expect(report.counts.breaking).toBe(2);
    expect(report.ignored.map((f) => f.rule).sort()).toEqual(['maximum-raised', 'reward-source-removed']);
    expect(report.unused_ignores.map((e) => e.line)).toEqual([5]);
    expect(report.expired_ignores.map((e) => e.line)).toEqual([4]);
    const bad = path.join(dir, 'bad.ignore');
    await writeFile(bad, 'just-a-rule\n');
    const err = await agent(['schema-diff', V1, V2, '--ignore', bad]);
    expect(err.code).toBe(2);
    expect(err.stderr).toContain('bad.ignore:1: expected');
  });

  it('--base compares an env folder with itself at a git revision', async () => {
    const repo = await tmp.dir('agent-git-');
    const env = path.join(repo, 'envs', 'weather');
    await cp(V1, env, { recursive: true });
    const git = (...args: string[]): Promise<unknown> => execa('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], { cwd: repo });
    await git('init', '-q');
    await git('add', '.');
    await git('commit', '-qm', 'v1');
    for (const f of ['state_schema.json', 'action_schema.json', 'reward_schema.json']) await cp(path.join(V2, f), path.join(env, f));
    const r = await agent(['schema-diff', env, '--base', 'HEAD', '--format', 'json']);
    expect(r.code).toBe(1);
    expect((JSON.parse(r.stdout) as { counts: { breaking: number } }).counts.breaking).toBe(4);
    const missing = await agent(['schema-diff', env, '--base', 'no-such-rev']);
    expect(missing.code).toBe(2);
    // The revision is what is wrong, not the folder.
    expect(missing.stderr).toContain("no revision 'no-such-rev'");
    await cp(V1, path.join(repo, 'envs', 'new-env'), { recursive: true });
    const added = await agent(['schema-diff', path.join(repo, 'envs', 'new-env'), '--base', 'HEAD']);
    expect(added.code).toBe(2);
    expect(added.stderr).toContain("'envs/new-env' does not exist at revision 'HEAD'");
  });

  it.each([
    [['schema-diff', V1], /needs <old> and <new>/],
    [['schema-diff', V1, 'fixtures/missing'], /'fixtures\/missing' does not exist/],
    [['schema-diff', V1, 'fixtures/weather/state_schema.json'], /compare a folder with a folder/],
    [['schema-diff', 'fixtures/weather/tools.ts', 'fixtures/weather/tools.ts'], /cannot tell what kind of schema/],
    [['schema-diff', V1, V2, '--mode', 'sideways'], /argument 'sideways' is invalid/],
  ])('%j exits 2 with a message', async (args, message) => {
    const r = await agent(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('two schema files: the kind comes from the file name or --kind', async () => {
    const r = await agent(['schema-diff', `${V1}/reward_schema.json`, `${V2}/reward_schema.json`, '--format', 'json']);
    expect(JSON.parse(r.stdout).findings.map((f: { rule: string }) => f.rule).sort()).toEqual(['maximum-raised', 'reward-delay-ms-changed', 'reward-source-removed']);
    const s = await agent(['schema-diff', `${V1}/state_schema.json`, `${V2}/state_schema.json`, '--kind', 'state', '--fail-on', 'info']);
    expect(s.code).toBe(1);
  });
});

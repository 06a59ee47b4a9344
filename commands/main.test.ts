import { execa } from 'execa';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { otelConfig, validate } from '../src/internal.js';
import { FakeOtlpCollector } from '../src/observe/fake-otlp-collector.js';
import { createProgram } from './main.js';
import { interruptAfterFirstEpisode, readRunSummary, runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

const agent = runAgent;

const tmpOut = (): Promise<string> => tmp.dir('agent-cli-');

describe('agent', () => {
  it('--help lists the commands that exist, and only those', async () => {
    const { code, stdout } = await agent(['--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('run [options] [env-dir]');
    const program = createProgram({ stdout: new PassThrough(), stderr: new PassThrough(), exitCode: 0 });
    expect(program.commands.map((c) => c.name())).toEqual(['run', 'schema-diff', 'fuzz', 'doctor', 'reward', 'rewards', 'rescore', 'export', 'benchmark', 'debug', 'mcp-serve', 'worker', 'serve', 'sandbox', 'docs']);
  });

  it('shows duration defaults as the flags read them, and asks for a subcommand where one is missing', async () => {
    const serve = await agent(['serve', '--help']);
    const flat = serve.stdout.replace(/\s+/g, ' ');
    expect(flat).toContain('ends (default: 5m)');
    expect(flat).toContain('its slot freed (default: 30s)');
    expect((await agent(['worker', '--help'])).stdout.replace(/\s+/g, ' ')).toContain('wait this long (default: 10s)');
    const bare = await agent(['rewards']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('sla [options] <run-dir>');
    expect(bare.stderr).toContain('error: name a subcommand (listed above)');
    expect(bare.stderr).not.toContain('outputHelp');
  });

  it('run --json prints only events, as JSON lines that match the schema', async () => {
    const out = await tmpOut();
    const { code, stdout, stderr } = await agent(['run', 'fixtures/weather', '--episodes', '3', '--max-steps', '2', '--json', '--out', out, '--tool-option', 'latency_scale=0']);
    expect(code).toBe(0);
    const schema = JSON.parse(await readFile('schemas/run-event.schema.json', 'utf8')) as Record<string, unknown>;
    const lines = stdout.trim().split('\n');
    for (const line of lines) expect(validate(schema, JSON.parse(line))).toEqual([]);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ type: 'run_started' });
    expect(JSON.parse(lines.at(-1) ?? '{}')).toMatchObject({ type: 'run_finished', status: 'completed' });
    expect(stderr).toContain('run folder:');
  });

  it('run without a TTY prints plain progress lines on stderr, and its result (the summary, the folder) on stdout', async () => {
    const out = await tmpOut();
    const { code, stdout, stderr } = await agent(['run', 'fixtures/weather', '--episodes', '2', '--max-steps', '2', '--out', out, '--tool-option', 'latency_scale=0']);
    expect(code).toBe(0);
    expect(stderr).toMatch(/^run \S+: env weather, 2 episodes × ≤2 steps/);
    expect(stderr).toMatch(/\[1\/2\] episode \d: 2 steps/);
    expect(stdout).not.toMatch(/episode \d: 2 steps/);
    expect(stdout).toMatch(/^done: 2\/2 episodes, 4 steps \(0 failed\)/);
    expect(stdout).toMatch(/^run folder: /m);
    // An episode's line shows its reward when it ended; the summary says its figures include what arrived later.
    expect(stdout).toMatch(/^reward per episode: mean .* \(with the delayed rewards that arrived after each episode ended\)$/m);
    expect(stdout).toMatch(/llm_score: 4 arrived \(mean [\d.]+\), 0 pending, 0 imputed, 0 late; arrival p50/);
    expect((await readdir(out)).length).toBe(1);
  });

  it('run with OTEL_EXPORTER_OTLP_ENDPOINT set sends a trace per episode under OTEL_SERVICE_NAME, and says where they went', async () => {
    await using collector = await FakeOtlpCollector.start();
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', collector.url);
    vi.stubEnv('OTEL_SERVICE_NAME', 'trainer-7');
    try {
      const out = await tmpOut();
      const { code, stdout } = await agent(['run', 'fixtures/weather', '--episodes', '2', '--max-steps', '2', '--out', out, '--tool-option', 'latency_scale=0']);
      expect(code).toBe(0);
      const spans = collector.spans;
      expect(stdout).toContain(`traces: ${spans.length} spans sent to ${collector.url}/v1/traces\n`);
      expect(spans.filter((s) => s.parentSpanId === '').map((s) => s.name).sort()).toEqual(['episode 0', 'episode 1']);
      expect(spans.filter((s) => s.name.startsWith('step '))).toHaveLength(4);
      expect(new Set(spans.map((s) => s.resource['service.name']))).toEqual(new Set(['trainer-7']));
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('an endpoint with credentials: sent as an Authorization header, never printed or written, whether the collector takes the spans or refuses them', async () => {
    await using collector = await FakeOtlpCollector.start();
    await using refusing = await FakeOtlpCollector.start({ status: 400 });
    for (const base of [collector.url, refusing.url]) {
      const secret = base.replace('http://', 'http://trainer:s3cr%40t@');
      for (const [flags, env] of [[['--otel', secret], undefined], [[], secret]] as const) {
        if (env) vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', env);
        try {
          const out = await tmpOut();
          const { code, stdout, stderr } = await agent(['run', 'fixtures/weather', '--episodes', '1', '--max-steps', '2', '--out', out, '--tool-option', 'latency_scale=0', ...flags]);
          expect(code).toBe(0);
          const [runId] = await readdir(out);
          const written = await readFile(path.join(out, runId as string, 'summary.json'), 'utf8');
          for (const text of [stdout, stderr, written]) expect(text).not.toMatch(/s3cr|trainer:/);
          expect(stdout).toContain(`sent to ${base}/v1/traces`);
        } finally {
          vi.unstubAllEnvs();
        }
      }
    }
    for (const c of [collector, refusing]) expect(new Set(c.authorizations)).toEqual(new Set([`Basic ${Buffer.from('trainer:s3cr@t').toString('base64')}`]));
    expect(() => otelConfig({}, 'ftp://trainer:s3cret@c:4318')).toThrow(/got "ftp:\/\/\*\*\*@c:4318"/);
  });

  it.each([
    [['run', 'fixtures/weather', '--episodes', '0'], /--episodes.*expected a whole number/],
    [['run', 'fixtures/weather', '--otel', 'localhost:4318'], /--otel must be an http\(s\) URL of an OTLP\/HTTP receiver/],
    [['run', 'fixtures/weather', '--bogus'], /unknown option '--bogus'/],
    [['run'], /missing required argument 'env-dir'/],
    [['run', 'fixtures/weather', '--tool-option', 'novalue'], /expected key=value/],
    [['run', 'fixtures/missing-env'], /no environment folder at 'fixtures\/missing-env', and no env of that name ships with the toolkit\nhint: Pass a folder .* or the name of a shipped env: weather, signal-game, lookup, tau-bench\/airline, tau-bench\/retail/],
    [['run', 'fixtures/weather', '--policy', 'nope.ts'], /cannot load policy module 'nope.ts'/],
  ])('%j exits 2 with a message that says what to fix', async (args, message) => {
    const { code, stderr } = await agent(args);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
  });

  it('takes a shipped env by name wherever it takes an env folder, from any directory', async () => {
    const out = await tmpOut();
    const cwd = process.cwd();
    // Away from the checkout: no fixtures/ folder here, the names resolve to the package's own.
    process.chdir(out);
    try {
      for (const args of [['run', 'weather'], ['run', 'tau-bench/airline'], ['run', 'fixtures/weather']]) {
        const { code, stderr } = await agent([...args, '--episodes', '1', '--max-steps', '1', '--out', out, '--tool-option', 'latency_scale=0']);
        expect(code, `${args.join(' ')}: ${stderr}`).toBe(0);
      }
      const { code, stdout } = await agent(['schema-diff', 'weather', 'weather']);
      expect(code, stdout).toBe(0);
    } finally {
      process.chdir(cwd);
    }
  });

  it('a bad env folder exits 2 naming the file and the JSON pointer, and writes nothing', async () => {
    const out = await tmpOut();
    const { code, stderr } = await agent(['run', 'fixtures/realworld', '--out', out]);
    expect(code).toBe(2);
    expect(stderr).toContain('action_schema.json is missing');
    expect(await readdir(out)).toEqual([]);
  });

  it('--port off loopback needs a token: refused before anything is written; with one it serves, says so, and prints the token once', async () => {
    const out = await tmp.dir('agent-host-');
    const refused = await runAgent(['run', 'fixtures/weather', '--episodes', '1', '--port', '0', '--host', '0.0.0.0', '--out', out]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/error: serving on 0\.0\.0\.0 needs a token.*\nhint: Pass --token/s);
    expect(await readdir(out)).toEqual([]);
    const served = await runAgent(['run', 'fixtures/weather', '--episodes', '1', '--max-steps', '2', '--port', '0', '--host', '0.0.0.0', '--token', 'a-long-enough-test-token', '--out', out, '--tool-option', 'latency_scale=0.01']);
    expect(served.code, served.stderr).toBe(0);
    expect(served.stderr).toContain('warning: serving on 0.0.0.0: anyone who can reach this machine and has the token');
    expect(served.stderr).toContain('server token: (as given)');
    const local = await runAgent(['run', 'fixtures/weather', '--episodes', '1', '--max-steps', '2', '--port', '0', '--out', out, '--tool-option', 'latency_scale=0.01']);
    expect(local.stderr.match(/server token: [\w-]{32} /g)).toHaveLength(1);
  });

  it('Ctrl-C stops gracefully: exit 130, folder flushed and marked interrupted', async () => {
    const out = await tmpOut();
    const result = await interruptAfterFirstEpisode(['fixtures/weather', '--episodes', '40', '--concurrency', '4', '--out', out, '--tool-option', 'latency_scale=0.05']);
    expect(result.exitCode).toBe(130);
    expect(result.stderr).toContain('interrupted: cancelling calls in flight');
    const summary = await readRunSummary(out);
    expect(summary.status).toBe('interrupted');
    expect(summary.episodes.finished).toBeLessThan(40);
  });
});

describe('agent run | head', () => {
  it('ends quietly when its reader goes away (agent --help | head)', async () => {
    const child = execa('node', ['bin/agent.js', 'benchmark', '--help'], { reject: false, stdout: 'pipe' });
    child.stdout?.destroy();
    const result = await child;
    expect(result.stderr).not.toMatch(/EPIPE|Unhandled/);
    expect(result.exitCode).toBe(0);
  });

  it('stops quietly when stdout is closed, and still flushes the run folder', async () => {
    const out = await tmpOut();
    const child = execa('node', ['bin/agent.js', 'run', 'fixtures/weather', '--episodes', '30', '--json', '--out', out, '--tool-option', 'latency_scale=0.02'], { reject: false, stdout: 'pipe' });
    await new Promise<void>((resolve) => child.stdout?.once('data', () => resolve()));
    child.stdout?.destroy();
    const result = await child;
    expect(result.stderr).not.toContain('EPIPE');
    expect(result.exitCode).toBe(130);
    const summary = await readRunSummary(out);
    expect(summary.status).toBe('interrupted');
  });
});

describe('agent run --policy <module>', () => {
  it('drives episodes with a TypeScript policy module', async () => {
    const out = await tmpOut();
    const { code, stderr } = await agent(['run', 'fixtures/weather', '--episodes', '4', '--policy', 'fixtures/policies/ask-home-city.ts', '--out', out, '--tool-option', 'latency_scale=0']);
    expect(code).toBe(0);
    expect(stderr).toContain('policy fixtures/policies/ask-home-city.ts');
    expect(stderr.match(/1 steps, reward -?[\d.]+( \(\d+ pending\))?, \S+ \(policy_stop\)/g)).toHaveLength(4);
    const [runId] = await readdir(out);
    const lines = (await readFile(path.join(out, runId as string, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { params: { city: string }; episode: number });
    expect(lines.map((l) => l.params.city).sort()).toEqual(['上海', '北京', '杭州', '深圳']);
  });
});

/** `agent debug <run-dir>` non-interactive forms: states rebuilt at every seq equal the states the policy saw live. */
import { cp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { execa, type ResultPromise } from 'execa';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { inspectState, randomPolicy, Run, type JsonValue, type Policy } from '../src/internal.js';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('agent debug', async () => {
  const seen = new Map<string, JsonValue>();
  // The policy sees the state each action is chosen on: the state at that step's seq_before.
  const watching: Policy = (obs, ctx) => {
    seen.set(`${obs.episode}:${obs.step}`, obs.state);
    return randomPolicy(obs, ctx);
  };
  const out = await tmp.dir('debug-');
  const run = await Run.prepare({ env: 'fixtures/weather', episodes: 3, concurrency: 2, maxSteps: 6, out, policy: watching, toolOptions: { latency_scale: 0.01 } });
  await run.execute();
  const dir = run.dir as string;
  const steps = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; step: number; seq_before: number; trace_id: string });

  it('rebuilds the state at every seq equal to the state seen live', async () => {
    expect(steps.length).toBe(18);
    for (const s of steps) {
      const rebuilt = await inspectState(dir, s.episode, { seq: s.seq_before });
      expect(rebuilt.state, `episode ${s.episode} step ${s.step}`).toEqual(seen.get(`${s.episode}:${s.step - 1}`));
    }
  });

  it('--trace prints the events of a trace with their offsets, --json as a record', async () => {
    const id = steps[0]?.trace_id as string;
    const text = await runAgent(['debug', dir, '--trace', id]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^trace ${id} \\(episode \\d\\): get_weather .* → resolved in [\\d.]+ ms, 1 attempt`));
    const json = JSON.parse((await runAgent(['debug', dir, '--trace', id, '--json'])).stdout) as { events: { type: string; at_ms: number }[] };
    expect(json.events[0]).toMatchObject({ type: 'dispatched', at_ms: 0 });
    expect(json.events.map((e) => e.type)).toContain('trace_settled');
  });

  it('--trace finds a step whose dispatch died with its process (settled on resume as TOOL_LOST): from its settle record', async () => {
    const id = steps[1]?.trace_id as string;
    const copy = path.join(await tmp.dir('debug-lost-'), 'run');
    await cp(dir, copy, { recursive: true });
    const events = (await readFile(path.join(copy, 'events.jsonl'), 'utf8')).split('\n');
    await writeFile(path.join(copy, 'events.jsonl'), events.filter((l) => !(l.includes(`"trace_id":"${id}"`) && !l.includes('"type":"trace_settled"'))).join('\n'));
    const json = JSON.parse((await runAgent(['debug', copy, '--trace', id, '--json'])).stdout) as { action: string; events: { type: string }[] };
    expect(json.action).toBe('get_weather');
    const types = json.events.map((e) => e.type);
    expect(types).toContain('trace_settled');
    expect(types).not.toContain('dispatched');
  });

  it('--field lists each change with its seq and trace; --state --at gives the state then', async () => {
    const field = JSON.parse((await runAgent(['debug', dir, '--field', '0', '/current_weather/temperature', '--json'])).stdout) as { changes: { seq: number; trace_id?: string; value?: number }[] };
    expect(field.changes[0]).toEqual({ seq: 0, time: '' });
    expect(field.changes.length).toBeGreaterThan(1);
    expect(field.changes.slice(1).every((c) => typeof c.value === 'number' && c.trace_id?.startsWith('ep-0:'))).toBe(true);
    const at = JSON.parse((await runAgent(['debug', dir, '--state', '0', '--at', String(field.changes[1]?.seq), '--json'])).stdout) as { state: { current_weather: { temperature: number } } };
    expect(at.state.current_weather.temperature).toBe(field.changes[1]?.value);
  });

  it('says what is wrong: no form, an unknown trace or episode, a bad pointer, a seq out of range', async () => {
    expect(await runAgent(['debug', dir])).toMatchObject({ code: 2, stderr: expect.stringContaining('the debug console needs a terminal') });
    expect((await runAgent(['debug', dir])).stderr).toContain(`agent debug ${dir} --state <episode> [--at <seq> | --time <iso>] [--json]`);
    expect(await runAgent(['debug'])).toMatchObject({ code: 2, stderr: expect.stringContaining('pass a run folder (agent debug runs/<run-id>) or --attach <host:port>') });
    expect(await runAgent(['debug', dir, '--attach', '7070'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--attach opens the console on a live run') });
    expect(await runAgent(['debug', dir, '--trace', 'x', '--state', '1'])).toMatchObject({ code: 2, stderr: expect.stringContaining('pass one of --trace <id>, --state <episode> or --field <episode> <pointer>') });
    expect(await runAgent(['debug', dir, '--trace', 'ep-9:9'])).toMatchObject({ code: 2, stderr: expect.stringContaining("no trace 'ep-9:9'") });
    expect(await runAgent(['debug', dir, '--state', '7'])).toMatchObject({ code: 2, stderr: expect.stringContaining('no episode 7') });
    expect(await runAgent(['debug', dir, '--field', '0', 'current_weather'])).toMatchObject({ code: 2, stderr: expect.stringContaining('is not a JSON pointer') });
    expect(await runAgent(['debug', dir, '--state', '0', '--at', '999'])).toMatchObject({ code: 2, stderr: expect.stringContaining('has seqs 0 …') });
    expect(await runAgent(['debug', dir, '--state', '0', '--time', '2000-01-01T00:00:00Z'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/episode 0 began at \S+, after 2000-01-01T00:00:00\.000Z: it had no state then\nhint: Pass --time at or after its start, or --at 0/) });
    expect(await runAgent(['debug', path.join(dir, 'nope'), '--trace', 'x'])).toMatchObject({ code: 2, stderr: expect.stringContaining('is not a run folder') });
  });

  it('--web serves the console over the folder and prints its URL, token in the fragment; Ctrl-C stops it', async () => {
    const child = execa('node', ['bin/agent.js', 'debug', '--web', dir, '--json'], { reject: false, stdout: 'pipe', stderr: 'pipe' });
    const { url } = await firstLine<{ type: string; url: string }>(child);
    const token = decodeURIComponent(new URL(url).hash.replace('#token=', ''));
    const base = new URL(url).origin;
    expect((await fetch(`${base}/api/overview`)).status).toBe(401);
    const overview = (await (await fetch(`${base}/api/overview`, { headers: { authorization: `Bearer ${token}` } })).json()) as { traces: { total: number } };
    expect(overview.traces.total).toBe(steps.length);
    child.kill('SIGINT');
    expect((await child).exitCode).toBe(0);
  });

  it('--web --attach shows a live run through its event stream', async () => {
    const policy: Policy = async (obs, ctx) => {
      if (obs.episode === 1) await release;
      return randomPolicy(obs, ctx);
    };
    let open: () => void = () => undefined;
    const release = new Promise<void>((resolve) => (open = resolve));
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 2, concurrency: 1, maxSteps: 3, out: await tmp.dir('debug-web-live-'), policy, port: 0, toolOptions: { latency_scale: 0.01 } });
    const started = new Promise<string>((resolve) => run.events.on('run_started', (e) => resolve(e.url as string)));
    const done = run.execute();
    const child = execa('node', ['bin/agent.js', 'debug', '--web', '--attach', new URL(await started).host, '--token', run.server?.token ?? '', '--json'], { reject: false, stdout: 'pipe', stderr: 'pipe' });
    try {
      const { url } = await firstLine<{ url: string }>(child);
      const auth = { authorization: `Bearer ${decodeURIComponent(new URL(url).hash.replace('#token=', ''))}` };
      // The attached feed catches up with the run's stream (episode 0's three steps) while the run waits.
      await vi.waitFor(async () => expect(((await (await fetch(`${new URL(url).origin}/api/overview`, { headers: auth })).json()) as { traces: { settled: number } }).traces.settled).toBe(3), { timeout: 10_000, interval: 20 });
    } finally {
      open();
      await done;
      child.kill('SIGINT');
      await child;
    }
  });

  it('--web says what goes with it', async () => {
    expect(await runAgent(['debug', dir, '--port', '0'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--port goes with --web') });
    expect(await runAgent(['debug', dir, '--web', '--trace', 'x'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--web opens the console') });
    expect(await runAgent(['debug', dir, '--web', '--host', '0.0.0.0'])).toMatchObject({ code: 2, stderr: expect.stringContaining('needs a token') });
  });
});

/** The first line a child prints on stdout, as JSON. */
async function firstLine<T>(child: ResultPromise): Promise<T> {
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  try {
    for await (const line of lines) return JSON.parse(line) as T;
  } finally {
    lines.close();
  }
  throw new Error(`the command printed nothing: ${String((await child).stderr)}`);
}

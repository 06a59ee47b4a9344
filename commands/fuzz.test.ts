import { readdir } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

const agent = runAgent;

const store = (): Promise<string> => tmp.dir('agent-fuzz-cli-');

describe('agent fuzz', () => {
  it('fixtures/airline ends clean (exit 0)', async () => {
    const r = await agent(['fuzz', 'fixtures/airline', '--runs', '400', '--seed', '3', '--store', await store()]);
    expect(r.stdout).toMatch(/^clean: 400 cases/m);
    expect(r.code).toBe(0);
  });

  it('fixtures/buggy fails (exit 1) with a replay command per failure that reproduces it', async () => {
    const dir = await store();
    const r = await agent(['fuzz', 'fixtures/buggy', '--runs', '60', '--seed', '1', '--tool-timeout', '100', '--actions', 'double_score,book_seats', '--store', dir]);
    expect(r.code).toBe(1);
    const replay = /replay: agent fuzz fixtures\/buggy --replay (\S+state-valid_double_score_STATE_INVALID\.json)/.exec(r.stdout)?.[1];
    expect(replay).toBeDefined();
    expect(r.stdout).toContain('params: {"points":51}');
    const again = await agent(['fuzz', 'fixtures/buggy', '--replay', replay as string, '--store', dir]);
    expect(again.code).toBe(1);
    expect(again.stdout).toContain('fails: state-valid STATE_INVALID');
  });

  it('--json prints only JSON lines: started, failure, done', async () => {
    const r = await agent(['fuzz', 'fixtures/buggy', '--runs', '30', '--seed', '1', '--tool-timeout', '100', '--actions', 'greet', '--json', '--store', await store()]);
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string });
    expect(events[0]?.type).toBe('started');
    expect(events.at(-1)?.type).toBe('done');
    expect(events.filter((e) => e.type === 'failure')).toHaveLength(1);
  });

  it('--schema --generate prints N JSON lines, all valid or all invalid, the same for the same seed', async () => {
    const a = await agent(['fuzz', '--schema', 'fixtures/weather/state_schema.json', '--generate', '5', '--seed', '4']);
    const b = await agent(['fuzz', '--schema', 'fixtures/weather/state_schema.json', '--generate', '5', '--seed', '4']);
    expect(a.stdout).toBe(b.stdout);
    expect(a.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { valid: boolean }).valid)).toEqual([true, true, true, true, true]);
    const bad = await agent(['fuzz', '--schema', 'fixtures/weather/state_schema.json', '--generate', '5', '--invalid']);
    expect(bad.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { valid: boolean }).valid)).toEqual([false, false, false, false, false]);
  });

  it.each([
    [['fuzz'], /needs an env folder, or --schema FILE --generate N/],
    [['fuzz', 'fixtures/weather', '--actions', 'nope'], /unknown action nope/],
    [['fuzz', 'fixtures/weather', '--invalid-ratio', '2'], /between 0 and 1/],
    [['fuzz', 'fixtures/weather', '--time-budget', 'soon'], /expected a duration/],
    [['fuzz', '--schema', 'fixtures/weather/state_schema.json'], /--schema needs --generate N/],
  ])('%j exits 2 with a message', async (args, message) => {
    const r = await agent(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('--time-budget stops starting cases', async () => {
    const dir = await store();
    const r = await agent(['fuzz', 'fixtures/weather', '--runs', '1000000', '--time-budget', '300ms', '--tool-option', 'latency_scale=0', '--store', dir]);
    expect(r.code).toBe(0);
    const cases = Number(/^clean: (\d+) cases/m.exec(r.stdout)?.[1]);
    expect(cases).toBeGreaterThan(0);
    expect(cases).toBeLessThan(1_000_000);
    expect(await readdir(dir)).toEqual([]);
  });
});

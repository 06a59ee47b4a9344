import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Fuzzer, type FuzzOptions, type FuzzSummary } from '../internal.js';
import { runAgent } from '../../commands/testing.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tmp(prefix: string): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** A bank env in a folder of its own: the balance's schema, one action's params, initial states, the tools module. */
async function bankEnv(balance: object, action: Record<string, Record<string, object>>, initialStates: object[], tools: string): Promise<string> {
  const dir = await tmp('agent-bank-');
  const [name, params] = Object.entries(action)[0] as [string, Record<string, object>];
  await writeFile(path.join(dir, 'state_schema.json'), JSON.stringify({ type: 'object', required: ['balance'], properties: { balance } }));
  await writeFile(path.join(dir, 'action_schema.json'), JSON.stringify({ properties: { [name]: { params } } }));
  await writeFile(path.join(dir, 'reward_schema.json'), JSON.stringify({ properties: {} }));
  await writeFile(path.join(dir, 'initial_states.json'), JSON.stringify(initialStates));
  await writeFile(path.join(dir, 'tools.mjs'), tools);
  return dir;
}

async function fuzz(options: FuzzOptions): Promise<FuzzSummary> {
  await using f = await Fuzzer.prepare({ storeDir: await tmp('agent-fuzz-store-'), toolTimeoutMs: 100, ...options });
  return await f.run();
}

describe('agent fuzz on fixtures/buggy', () => {
  it('finds every planted defect, each shrunk to a minimal input', async () => {
    const summary = await fuzz({ env: 'fixtures/buggy', runs: 150, seed: 1 });
    const found = Object.fromEntries(summary.failures.map((g) => [g.signature, g.case.params]));
    expect(found).toEqual({
      'no-crash:book_seats:TOOL_CRASHED': { count: 10 }, // off-by-one at the bound
      'no-crash:greet:TOOL_CRASHED': { name: '' }, // crash when the optional title is absent
      'state-valid:double_score:STATE_INVALID': { points: 51 }, // patch breaks the state schema
      'no-timeout:wait_for_partner:TOOL_TIMEOUT': {}, // hang
      'no-loop-block:checksum:LOOP_BLOCKED': { text: '' }, // blocks the event loop
    });
    for (const g of summary.failures) expect(g.case.state).toEqual({ seats: 0, score: 0 });
  });

  it('each check can be turned off', async () => {
    const summary = await fuzz({ env: 'fixtures/buggy', runs: 60, seed: 1, actions: ['checksum', 'greet'], checks: ['no-crash', 'rejects-invalid', 'accepts-valid'] });
    expect(summary.failures.map((g) => g.signature)).toEqual(['no-crash:greet:TOOL_CRASHED']);
  });

  it('replays saved failures first: a fixed bug is shown as fixed, a remaining one again', async () => {
    const env = path.join(await tmp('agent-fuzz-env-'), 'buggy');
    await cp('fixtures/buggy', env, { recursive: true });
    const store = await tmp('agent-fuzz-saved-');
    const first = await fuzz({ env, runs: 80, seed: 1, actions: ['double_score', 'greet'], storeDir: store });
    expect(first.failures.map((g) => g.signature).sort()).toEqual(['no-crash:greet:TOOL_CRASHED', 'state-valid:double_score:STATE_INVALID']);
    expect((await readdir(path.join(store, 'buggy'))).length).toBe(2);
    // Fix double_score (cap the score), leave greet broken.
    const tools = path.join(env, 'tools.ts');
    await writeFile(tools, (await readFile(tools, 'utf8')).replace("value: points * 2 }", "value: Math.min(points * 2, 100) }"));
    const second = await fuzz({ env, runs: 0, storeDir: store });
    expect(second.fixed).toEqual(['state-valid:double_score:STATE_INVALID']);
    expect(second.failures.map((g) => [g.signature, g.replayed])).toEqual([['no-crash:greet:TOOL_CRASHED', true]]);
    expect(await readdir(path.join(store, 'buggy'))).toEqual(['no-crash_greet_TOOL_CRASHED.json']);
  });
});

describe('agent fuzz on clean envs', () => {
  it('fixtures/weather ends clean: valid calls accepted, invalid ones rejected with their pointer, disabled ones refused', async () => {
    const summary = await fuzz({ env: 'fixtures/weather', runs: 300, seed: 2, invalidRatio: 0.5, toolOptions: { latency_scale: 0 } });
    expect(summary.failures).toEqual([]);
    expect(summary.by_kind['invalid']).toBeGreaterThan(50);
    expect(summary.by_kind['valid']).toBeGreaterThan(50);
    expect(summary.by_kind['disabled']).toBeGreaterThan(0);
  });

  it('plans the same cases for the same seed, other cases for another', async () => {
    await using a = await Fuzzer.prepare({ env: 'fixtures/weather', seed: 5 });
    await using b = await Fuzzer.prepare({ env: 'fixtures/weather', seed: 5 });
    await using c = await Fuzzer.prepare({ env: 'fixtures/weather', seed: 6 });
    const plan = (f: Fuzzer): unknown[] => Array.from({ length: 20 }, (_, i) => f.plan(i));
    expect(plan(a)).toEqual(plan(b));
    expect(plan(a)).not.toEqual(plan(c));
  });

  it('reports a tool whose outcome changes between runs of the same case as flaky', async () => {
    const env = await tmp('agent-fuzz-flaky-');
    await writeFile(
      path.join(env, 'env.json'),
      JSON.stringify({ state: { type: 'object' }, actions: [{ name: 'roll', parameters: { type: 'object', properties: {} } }], initial_states: [{}], module: 'tools.mjs' }),
    );
    // Math.random, not ctx.rng: the outcome is not a function of the case.
    await writeFile(path.join(env, 'tools.mjs'), 'export const roll = () => ({ observation: Math.random() });\n');
    const summary = await fuzz({ env, runs: 10 });
    expect(summary.failures.map((g) => g.signature)).toEqual(['deterministic:roll:FLAKY']);
  });
});

describe('state-aware fuzzing', () => {
  it('finds an off-by-one between a param and the state (amount > balance + 1), and shrinks both toward round numbers', async () => {
    // The bug: an overdraft of up to 1 slips through the check, and the patch breaks `minimum: 0`.
    const dir = await bankEnv(
      { type: 'number', minimum: 0, maximum: 100000 },
      { withdraw: { amount: { type: 'number', minimum: 0, maximum: 100000 } } },
      [{ balance: 388.501 }, { balance: 1250.75 }],
      `import { ToolError } from 'agentic-rl-toolkit';
export const withdraw = ({ amount }, ctx) => {
  if (amount > ctx.state.balance + 1) throw new ToolError('TOOL_FAILED', 'withdraw', 'insufficient funds');
  return { patch: [{ op: 'replace', path: '/balance', value: ctx.state.balance - amount }] };
};`,
    );
    const summary = await fuzz({ env: dir, runs: 300, seed: 5 });
    const found = summary.failures.find((f) => f.check === 'state-valid');
    expect(found).toBeDefined();
    const { params, state } = (found as unknown as { case: { params: { amount: number }; state: { balance: number } } }).case;
    // Shrunk to whole numbers, still exactly in the window the bug opens.
    expect(Number.isInteger(params.amount) && Number.isInteger(state.balance)).toBe(true);
    expect(params.amount).toBeGreaterThan(state.balance);
    expect(params.amount).toBeLessThanOrEqual(state.balance + 1);
  });

  it('reaches state-dependent bugs that live near the state schema\'s bounds, whatever the seed (the state pool grows with --runs)', async () => {
    // The bug: no check against the maximum, so a deposit above a balance of 99,900 can break it
    // (one state in a thousand, drawn at random).
    const dir = await bankEnv(
      { type: 'integer', minimum: 0, maximum: 100000 },
      { deposit: { amount: { type: 'integer', minimum: 1, maximum: 100 } } },
      [{ balance: 100 }],
      `export const deposit = ({ amount }, ctx) => ({ patch: [{ op: 'replace', path: '/balance', value: ctx.state.balance + amount }] });`,
    );
    for (const seed of [0, 1]) {
      const summary = await fuzz({ env: dir, runs: 2_000, seed });
      expect(summary.failures.map((f) => f.signature), `seed ${seed}`).toContain('state-valid:deposit:STATE_INVALID');
    }
  });
});


describe('agent fuzz where the generator cannot', () => {
  it('counts the cases it could not plan, warns of them, and does not pass a run that ran none', async () => {
    // A note that starts with both a and b: no params exist, though no rule of the generator's proves it.
    const env = await bankEnv({ type: 'integer' }, { deposit: { note: { type: 'string', allOf: [{ pattern: '^a' }, { pattern: '^b' }] } } }, [{ balance: 0 }], 'export const deposit = () => ({ observation: 1 });');
    const summary = await fuzz({ env, runs: 5, seed: 1 });
    expect(summary.cases).toBe(0);
    expect(summary.ungenerated).toEqual({ deposit: 5 });
    const cli = await runAgent(['fuzz', env, '--runs', '5', '--store', await tmp('agent-fuzz-store-')]);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toContain('warning: 5 planned cases not run: no valid params could be drawn for deposit (5)');
    expect(cli.stdout).toContain('nothing was tested: no case ran (exit 1)');
  });
});

/**
 * Fault tests: a tool (or a caller) acting as an attacker would. Each case must fail only its own
 * trace, with a typed error that says where, and leave the process, the other traces and the
 * state history untouched.
 */
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentEnv, defineEnv, loadEnvDefinition, type AgentInstance, type EnvManifest, type JsonObject, type JsonValue, type ToolHandler } from '../index.js';

const open: AsyncDisposable[] = [];
afterEach(async () => {
  for (const r of open.splice(0).reverse()) await r[Symbol.asyncDispose]();
});

async function agentWith(handlers: Record<string, ToolHandler>, manifest: Partial<EnvManifest> = {}, state: JsonValue = {}): Promise<AgentInstance> {
  const names = Object.keys(manifest.tools ?? handlers);
  const def = await defineEnv({ state: { type: 'object' }, actions: names.map((name) => ({ name, parameters: { type: 'object' } })), ...manifest });
  const env = await AgentEnv.create(def, { handlers });
  open.push(env);
  const agent = env.createInstance();
  await agent.reset(state);
  return agent;
}

/** A Proxy whose every trap throws. */
const trapped = (): object =>
  new Proxy(
    {},
    Object.fromEntries(['get', 'getPrototypeOf', 'ownKeys', 'has', 'getOwnPropertyDescriptor'].map((t) => [t, () => { throw new Error(`trap ${t}`); }])),
  );

describe('a tool that throws a hostile value fails its own trace, and nothing else', () => {
  const hostile: Record<string, () => unknown> = {
    'getters that throw': () => ({ get name(): string { throw Object.create(null); }, get message(): string { throw new Error('no'); } }),
    'a null-prototype object': () => Object.create(null),
    'a Proxy whose traps throw': trapped,
    'a symbol': () => Symbol('x'),
  };
  it.each(Object.keys(hostile))('%s', async (kind) => {
    const agent = await agentWith({
      evil: () => {
        throw (hostile[kind] as () => unknown)();
      },
      fine: () => ({ observation: 'ok' }),
    });
    const [bad, good] = await Promise.all([agent.step({ name: 'evil' }), agent.step({ name: 'fine' })]);
    expect(bad.info.status).toBe('failed');
    expect(bad.info.error?.code).toBe('TOOL_CRASHED');
    expect(bad.info.error?.message).toMatch(/^tool 'evil': threw /);
    expect(good.observation).toBe('ok');
  });
});

describe('a result that is not JSON is the tool breaking its contract', () => {
  const cyclic = (): JsonObject => {
    const o: Record<string, unknown> = { a: 1 };
    o['self'] = o;
    return o as JsonObject;
  };
  it.each([
    ['a BigInt observation', () => ({ observation: { n: 10n } }), '/observation/n', /bigint/],
    ['a function observation', () => ({ observation: () => 1 }), '/observation', /function/],
    ['a Date observation', () => ({ observation: new Date(0) }), '/observation', /a Date is not JSON/],
    ['a cyclic patch value', () => ({ patch: [{ op: 'add', path: '/x', value: cyclic() }] }), '/patch/0/value', /cyclic/],
    ['NaN in a patch', () => ({ patch: [{ op: 'add', path: '/x', value: Number.NaN }] }), '/patch/0/value', /finite/],
    ['a getter that throws', () => ({ get observation(): never { throw new Error('gotcha'); } }), '/observation', /reading it threw: Error: gotcha/],
  ] as const)('%s', async (_name, result, pointer, reason) => {
    const agent = await agentWith({ bad: result as unknown as ToolHandler });
    const r = await agent.step({ name: 'bad' });
    expect(r.info.error?.code).toBe('TOOL_CONTRACT');
    expect(r.info.error?.message).toContain(`not JSON at ${pointer}`);
    expect(r.info.error?.message).toMatch(reason);
    expect(r.info.seq).toBe(0);
  });
});

describe('params from a careless or hostile caller', () => {
  it('are refused with PARAMS_INVALID and a pointer, never a raw error', async () => {
    const agent = await agentWith({ echo: (p) => ({ observation: p }) });
    const getter = { get city(): string { throw new Error('boom'); } };
    for (const [params, pointer] of [
      [getter, '/city'],
      [trapped(), ''],
      [{ n: 1n }, '/n'],
    ] as const) {
      expect(() => agent.dispatch({ name: 'echo', params: params as unknown as JsonObject })).toThrow(expect.objectContaining({ code: 'PARAMS_INVALID', issues: [expect.objectContaining({ pointer })] }));
    }
  });

  it('refuses params nested 20,000 levels on an open schema with PARAMS_INVALID, not a RangeError', async () => {
    const agent = await agentWith({ echo: (p) => ({ observation: p }) });
    let deep: JsonObject = {};
    for (let i = 0; i < 20_000; i++) deep = { d: deep };
    expect(() => agent.dispatch({ name: 'echo', params: deep })).toThrow(expect.objectContaining({ code: 'PARAMS_INVALID', message: expect.stringMatching(/deeper than 512 levels/) }));
  });

  it('treats "__proto__" as a plain key: it can neither set a prototype nor slip past the schema', async () => {
    let seen: JsonObject | undefined;
    const def = await defineEnv({ state: { type: 'object' }, actions: [{ name: 'grant', parameters: { type: 'object', properties: { isAdmin: { const: false } } } }] });
    const env = await AgentEnv.create(def, { handlers: { grant: (p) => ((seen = p), { observation: null }) } });
    open.push(env);
    const agent = env.createInstance();
    await agent.reset({});
    await agent.step({ name: 'grant', params: JSON.parse('{"__proto__": {"isAdmin": true}}') as JsonObject });
    expect(seen?.['isAdmin']).toBeUndefined();
    expect(Object.getPrototypeOf(seen)).toBe(Object.prototype);
    expect(Object.keys(seen ?? {})).toEqual(['__proto__']);
  });
});

describe('history is immutable', () => {
  it('a tool that reuses and mutates one patch array cannot rewrite committed states', async () => {
    const patch = [{ op: 'replace' as const, path: '/n', value: 0 }];
    let n = 0;
    const agent = await agentWith({ bump: () => ((patch[0] = { op: 'replace', path: '/n', value: ++n }), { patch }) }, { state: { type: 'object', properties: { n: { type: 'integer', maximum: 3 } } } }, { n: 0 });
    for (let i = 0; i < 3; i++) await agent.step({ name: 'bump' });
    const history = await Promise.all([1, 2, 3].map(async (seq) => ((await agent.stateAt({ seq })).state as { n: number }).n));
    expect(history).toEqual([1, 2, 3]);
  });

  it('a "__proto__" key in a patch value is data: the state equals its JSON form', async () => {
    const agent = await agentWith({ meta: () => JSON.parse('{"patch": [{"op": "add", "path": "/meta", "value": {"__proto__": {"polluted": true}}}]}') as JsonObject });
    const r = await agent.step({ name: 'meta' });
    const meta = (r.state as { meta: Record<string, unknown> }).meta;
    expect(meta['polluted']).toBeUndefined();
    expect(JSON.parse(JSON.stringify(r.state))).toEqual(JSON.parse('{"meta": {"__proto__": {"polluted": true}}}'));
    expect(JSON.stringify(r.state)).toBe('{"meta":{"__proto__":{"polluted":true}}}');
  });
});

describe('limits a manifest enforces', () => {
  it('refuses timeout_ms above 2^31-1 (Node would clamp it to 1 ms)', async () => {
    await expect(defineEnv({ state: { type: 'object' }, actions: [{ name: 'a', parameters: { type: 'object' } }], tools: { a: { timeout_ms: 2 ** 31 } } })).rejects.toMatchObject({
      code: 'DEFINITION_INVALID',
      issues: [expect.objectContaining({ pointer: '/tools/a/timeout_ms' })],
    });
  });

  it.each([
    ['100k parentheses', `${'('.repeat(100_000)}n${')'.repeat(100_000)}`, /limit is 4096/],
    ['a 50k-term or chain', Array.from({ length: 50_000 }, () => 'n == 1').join(' or '), /limit is 4096/],
    ['40 nested nots', `${'not '.repeat(40)}n`, /nests deeper than 32 levels/],
  ])('refuses an enabled_if with %s as DEFINITION_INVALID with its pointer', async (_name, condition, reason) => {
    const err = await defineEnv({ state: { type: 'object', properties: { n: { type: 'integer' } } }, actions: [{ name: 'a', parameters: { type: 'object' } }], tools: { a: { enabled_if: condition } } }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DEFINITION_INVALID', issues: [expect.objectContaining({ pointer: '/tools/a/enabled_if', message: expect.stringMatching(reason) })] });
  });

  it('refuses an enabled_if that compares a string field with a number, and unknown keys with a suggestion', async () => {
    const err = await defineEnv({ state: { type: 'object', properties: { city: { type: 'string' } } }, actions: [{ name: 'a', parameters: { type: 'object' } }], tools: { a: { enabled_if: 'city == 3' } } }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DEFINITION_INVALID', issues: [expect.objectContaining({ message: expect.stringMatching(/compares 'city' \(string in the state schema\) with 3 \(a number\)/) })] });
    const typo = await loadEnvDefinition('fixtures/weather').then(() => defineEnv({ state: { type: 'object' }, actions: [{ name: 'a', parameters: { type: 'object' } }], tools: { a: { timeout: 5 } as never } })).catch((e: unknown) => e);
    expect(typo).toMatchObject({ code: 'DEFINITION_INVALID', issues: [expect.objectContaining({ pointer: '/tools/a/timeout', message: expect.stringMatching(/did you mean 'timeout_ms'/) })] });
  });
});

describe('subprocess tools die with their call', () => {
  const alive = (marker: string): boolean => {
    try {
      return execFileSync('pgrep', ['-f', marker], { encoding: 'utf8' }).trim() !== '';
    } catch {
      return false;
    }
  };

  it('answers when the JSON line is complete, although a background child keeps stdout open, and kills that child', async () => {
    const agent = await agentWith({}, { tools: { bg: { command: ['sh', '-c', `sleep 31.41 & echo '{"observation": "quick"}'`], timeout_ms: 5_000 } } });
    const r = await agent.step({ name: 'bg' });
    expect(r.info.status).toBe('resolved');
    expect(r.observation).toBe('quick');
    await expect.poll(() => alive('sleep 31.41'), { timeout: 2_000 }).toBe(false);
  });

  it('kills the whole process group on timeout', async () => {
    const agent = await agentWith({}, { tools: { hang: { command: ['sh', '-c', 'sleep 27.18 & sleep 27.18; echo "{}"'], timeout_ms: 200 } } });
    const r = await agent.step({ name: 'hang' });
    expect(r.info.error?.code).toBe('TOOL_TIMEOUT');
    await expect.poll(() => alive('sleep 27.18'), { timeout: 2_000 }).toBe(false);
  });

  it('caps what a tool may write (TOOL_OUTPUT_TOO_LARGE), and keeps the cause of a crash', async () => {
    const agent = await agentWith({}, {
      tools: {
        flood: { command: ['python3', '-c', 'import sys; sys.stdout.write("x" * 3_000_000)'], max_output_bytes: 1_000_000 },
        typo: { command: ['python3', '-c', 'import json; s = {"balance": 1}; print(s["balanc"])'] },
      },
    });
    const flood = await agent.step({ name: 'flood' });
    expect(flood.info.error).toMatchObject({ code: 'TOOL_OUTPUT_TOO_LARGE', message: expect.stringMatching(/more than 1000000 bytes/) });
    const typo = await agent.step({ name: 'typo' });
    expect(typo.info.error?.code).toBe('TOOL_CRASHED');
    expect(typo.info.error?.message.split('\n')[0]).toMatch(/exited with code 1: KeyError: 'balanc'$/);
  });
});

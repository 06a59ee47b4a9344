import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentError, defineEnv, loadEnvDefinition, parseActionDocument, ValidationError, type Issue } from '../internal.js';

const REAL = 'fixtures/realworld';
const readJson = (f: string): unknown => JSON.parse(readFileSync(path.join(REAL, f), 'utf8'));

const tmp: string[] = [];
afterAll(async () => {
  for (const d of tmp) await rm(d, { recursive: true, force: true });
});

/** Write an env folder and return its path. */
async function envDir(files: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agent-env-'));
  tmp.push(dir);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}

async function issuesOf(load: Promise<unknown>): Promise<readonly Issue[]> {
  const err = await load.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ValidationError);
  return (err as ValidationError).issues;
}

describe('real-world tool schemas load as actions', () => {
  const files = [
    'tau-bench-airline-tools.json',
    'tau-bench-retail-tools.json',
    'tau2-bench-airline-tools.json',
    'tau2-bench-airline-tools-normalized.json',
    'tau2-bench-retail-tools.json',
    'tau2-bench-retail-tools-normalized.json',
    'tau2-bench-telecom-tools.json',
    'tau2-bench-telecom-tools-normalized.json',
    'tau2-bench-telecom-user-tools.json',
    'tau2-bench-telecom-user-tools-normalized.json',
    'mcp-reference-tools.json',
  ];
  it.each(files)('%s', (file) => {
    const doc = readJson(file) as unknown[];
    const { actions, issues } = parseActionDocument(doc, { file });
    expect(issues).toEqual([]);
    expect(actions).toHaveLength(doc.length);
  });

  it('MCP tools in their native {name, inputSchema} form, draft-07 $schema included', () => {
    const raw = readJson('mcp-reference-tools-raw.json') as { servers: { tools: unknown[] }[] };
    const tools = raw.servers.flatMap((s) => s.tools);
    expect(tools).toHaveLength(58);
    const { actions, issues } = parseActionDocument(tools, { file: 'mcp-reference-tools-raw.json' });
    expect(issues).toEqual([]);
    expect(actions.map((a) => a.name)).toContain('get-sum');
  });

  it('as OpenAI function tools', () => {
    const tau = readJson('tau-bench-airline-tools.json') as { name: string; description: string; parameters: object }[];
    const { actions, issues } = parseActionDocument(
      tau.map((t) => ({ type: 'function', function: t })),
      { file: 'openai.json' },
    );
    expect(issues).toEqual([]);
    expect(actions.map((a) => a.name)).toEqual(tau.map((t) => t.name));
  });

  it('all 3,420 BFCL functions; the unsatisfiable ones are reported, not crashed on', () => {
    const fns = readJson('bfcl/bfcl-functions-normalized.json') as { name: string }[];
    expect(fns).toHaveLength(3420);
    const unsatisfiable: string[] = [];
    let badNames = 0;
    fns.forEach((fn, i) => {
      const { actions, issues, warnings } = parseActionDocument([fn], { file: 'bfcl-functions-normalized.json', pointer: `/${i}` });
      expect(issues, fn.name).toEqual([]);
      expect(actions).toHaveLength(1);
      if (actions[0]?.unsatisfiable) unsatisfiable.push(`${fn.name} ${actions[0].unsatisfiable.pointer.replace(`/${i}/`, '/')}`);
      if (warnings.some((w) => w.message.includes("OpenAI's function-name rule"))) badNames++;
    });
    // Names with dots (math.factorial) are legal for us but not for OpenAI: warned, counted.
    expect(badNames).toBe(1323);
    // Real defects of the data: string enums on an integer and on two array parameters.
    expect(unsatisfiable).toEqual([
      'extract_parameters_v1 /0/parameters/properties/metrics',
      'get_response /0/parameters/properties/intents',
      'Events_3_BuyEventTickets /0/parameters/properties/number_of_tickets',
    ]);
  });

  it("refuses BFCL's raw dialect with a hint, and converts it on request", () => {
    const raw = readJson('bfcl/bfcl-functions.json') as object[];
    const normalized = readJson('bfcl/bfcl-functions-normalized.json') as { parameters: unknown }[];
    const refused = parseActionDocument([raw[0]], { file: 'bfcl-functions.json' });
    expect(refused.actions).toEqual([]);
    expect(refused.issues[0]).toMatchObject({ file: 'bfcl-functions.json', pointer: '/0/parameters/type' });
    expect(refused.issues[0]?.message).toContain('"dialect": "bfcl"');
    let failures = 0;
    raw.forEach((fn, i) => {
      const r = parseActionDocument([fn], { file: 'bfcl-functions.json', dialect: 'bfcl' });
      if (r.issues.length > 0) failures++;
      else expect(r.actions[0]?.parameters, `function ${i}`).toEqual(normalized[i]?.parameters);
    });
    expect(failures).toBe(0);
  });

  it("takes a misspelt JSON Schema type for a typo, not for BFCL's dialect", () => {
    const action = (type: string): object => ({ name: 'f', parameters: { type: 'object', properties: { n: { type } } } });
    const messages = (type: string, dialect?: 'bfcl'): string[] => parseActionDocument([action(type)], { file: 'a.json', ...(dialect ? { dialect } : {}) }).issues.map((i) => `${i.pointer} ${i.message}`);
    expect(messages('integr')).toEqual(["/0/parameters/properties/n/type type 'integr' is not a JSON Schema type: did you mean 'integer'?"]);
    expect(messages('strng', 'bfcl')).toEqual(["/0/parameters/properties/n/type type 'strng' is not a JSON Schema type (nor a BFCL one): did you mean 'string'?"]);
    expect(messages('dict')[0]).toContain('"dialect": "bfcl"');
    expect(messages('widget')[0]).toContain('use one of string, number, integer, boolean, object, array, null');
  });
});

describe('loadEnvDefinition', () => {
  it('loads the article weather env exactly as written', async () => {
    const def = await loadEnvDefinition('fixtures/weather');
    expect([...def.actions.keys()]).toEqual(['get_weather']);
    expect(def.actions.get('get_weather')?.parameters).toEqual({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] });
    expect(def.actions.get('get_weather')?.enabledIf?.source).toBe('user_location != null');
    expect([...def.rewards.values()].map((r) => [r.name, r.delayMs])).toEqual([
      ['llm_score', 200],
      ['api_latency', 0],
    ]);
    expect(def.rewards.get('llm_score')?.schema).toEqual({ type: 'number', minimum: 0, maximum: 1 });
    // Latency is a cost: the slower the API, the lower the reward.
    expect(def.rewards.get('api_latency')?.weight).toBe(-0.001);
    expect(def.initialStates).toHaveLength(4);
  });

  // A misspelt type, an enabled_if path the state lacks, and a single '=': each must be located.
  const BROKEN_ACTIONS = {
    book: { params: { seat: { type: 'strng' } }, enabled_if: 'user.passport != null' },
    cancel: { params: {}, enabled_if: 'user.id = null' },
  };
  const USER_STATE = { type: 'object', properties: { user: { type: 'object', properties: { id: { type: 'string' } } } } };

  it('reports every problem with its file and JSON pointer, and what to do', async () => {
    const dir = await envDir({
      'state_schema.json': USER_STATE,
      'action_schema.json': {
        type: 'object',
        properties: { ...BROKEN_ACTIONS, both: { params: {}, parameters: { type: 'object' } } },
      },
      'reward_schema.json': { type: 'object', properties: { judge: { type: 'number', delay_ms: -5 } } },
    });
    const issues = await issuesOf(loadEnvDefinition(dir));
    const where = issues.map((i) => `${path.basename(i.file ?? '')}#${i.pointer}`);
    expect(where).toEqual(
      expect.arrayContaining([
        'action_schema.json#/properties/both',
        'reward_schema.json#/properties/judge/delay_ms',
      ]),
    );
    // A state schema that is not JSON is one error: not a cascade of enabled_if paths it "does not declare".
    const torn = await envDir({
      'state_schema.json': '{ "type": "object", "properties": { ',
      'action_schema.json': { properties: { greet: { params: {}, enabled_if: 'user.name != null and user.vip' } } },
    });
    const once = await issuesOf(loadEnvDefinition(torn));
    expect(once.map((i) => `${path.basename(i.file ?? '')} ${i.message.slice(0, 12)}`)).toEqual(['state_schema.json invalid JSON']);
    // after fixing the shape error, the deeper ones show up
    const dir2 = await envDir({
      'state_schema.json': USER_STATE,
      'action_schema.json': { type: 'object', properties: BROKEN_ACTIONS },
    });
    const deeper = await issuesOf(loadEnvDefinition(dir2));
    expect(deeper.map((i) => [path.basename(i.file ?? ''), i.pointer])).toEqual([
      ['action_schema.json', '/properties/book/params/properties/seat/type'],
      ['action_schema.json', '/properties/cancel/enabled_if'],
    ]);
    expect(deeper[1]?.message).toMatch(/single '='.*column 9/);
    const dir3 = await envDir({
      'state_schema.json': USER_STATE,
      'action_schema.json': { type: 'object', properties: { book: { params: {}, enabled_if: 'user.passport != null' } } },
    });
    const missing = await issuesOf(loadEnvDefinition(dir3));
    expect(missing[0]).toMatchObject({ pointer: '/properties/book/enabled_if' });
    expect(missing[0]?.message).toContain("reads 'user.passport', which the state schema does not declare");
  });

  it('locates JSON syntax errors by line and column', async () => {
    const dir = await envDir({ 'action_schema.json': '{\n  "type": "object",\n  "properties": {,}\n}' });
    const issues = await issuesOf(loadEnvDefinition(dir));
    expect(issues[0]?.message).toMatch(/invalid JSON at line 3, column 18/);
  });

  it('says what an env folder needs when the folder is wrong', async () => {
    await expect(loadEnvDefinition('fixtures/does-not-exist')).rejects.toMatchObject({ code: 'DEFINITION_NOT_FOUND' });
    const empty = await envDir({ 'README.md': 'nothing here' });
    const err = await loadEnvDefinition(empty).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentError);
    expect((err as AgentError).message).toContain('action_schema.json is missing');
  });

  it('validates env.json against the manifest schema and checks tool bindings', async () => {
    const dir = await envDir({
      'env.json': { actions: [{ name: 'a', parameters: { type: 'object' } }], tools: { a: { timeout_ms: -1, retry: { max_attemps: 3 } }, ghost: {} } },
    });
    const issues = await issuesOf(loadEnvDefinition(dir));
    expect(issues.map((i) => i.pointer)).toEqual(expect.arrayContaining(['/tools/a/timeout_ms', '/tools/a/retry/max_attemps']));
    const dir2 = await envDir({ 'env.json': { actions: [{ name: 'a' }], tools: { ghost: {}, a: { fallback: { action: 'nope' } } } } });
    const issues2 = await issuesOf(loadEnvDefinition(dir2));
    expect(issues2.map((i) => [i.pointer, i.message])).toEqual([
      ['/tools/ghost', "configures tool 'ghost', but no action of that name is declared"],
      ['/tools/a/fallback/action', "fallback action 'nope' is not declared"],
    ]);
  });

  it('stops loading when its signal aborts', async () => {
    const controller = new AbortController();
    controller.abort(new Error('user gave up'));
    await expect(loadEnvDefinition('fixtures/weather', { signal: controller.signal })).rejects.toThrow('user gave up');
  });

  it('rejects initial states that break the state schema', async () => {
    await expect(
      defineEnv({ state: { type: 'object', properties: { n: { type: 'integer' } } }, actions: [], initial_states: [{ n: 1 }, { n: 'two' }] }),
    ).rejects.toMatchObject({ issues: [{ pointer: '/initial_states/1/n' }] });
  });

  it('reads tools-module bindings, subprocess commands and HTTP urls from env.json', async () => {
    const def = await loadEnvDefinition('fixtures/polyglot');
    expect(def.actions.get('word_count')?.binding).toMatchObject({ kind: 'subprocess', command: ['python3', 'tools.py'] });
    expect(def.actions.get('shout')?.binding).toMatchObject({ kind: 'module', exportName: 'shout' });
    expect(def.actions.get('flaky_lookup')?.policy).toMatchObject({ timeoutMs: 10_000, retry: { maxAttempts: 3 }, fallback: { observation: { source: 'fallback', value: null } } });
  });
});

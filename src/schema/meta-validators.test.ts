import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GENERATED, validatorsSource } from '../../scripts/build-validators.js';
import { checkSchema, compileSchema, toIssues, validate, type JsonSchema } from './ajv.js';
import { createAjv } from './ajv-setup.js';
import { metaSchema, type MetaSchemaName } from './meta-schemas.js';
import * as precompiled from './meta-validators.generated.js';

/** What a validator compiled now from the schema file says of `doc`, as issues. */
function compiledNow(name: MetaSchemaName, doc: unknown): unknown {
  const schema = JSON.parse(JSON.stringify(metaSchema(name))) as JsonSchema;
  const v = createAjv().compile(schema as object);
  return v(doc) ? [] : toIssues(v.errors ?? [], 'f.json', schema);
}

describe('the meta-schemas compiled ahead', () => {
  it('are what schemas/ holds now (else: npm run build:validators)', () => {
    expect(readFileSync(GENERATED, 'utf8') === validatorsSource(), 'src/schema/meta-validators.generated.ts is stale: a schema in schemas/ changed; run `npm run build:validators`').toBe(true);
  });

  it('answer as the schema compiled at run time does, issue for issue', () => {
    const cases: [MetaSchemaName, unknown][] = [
      ['env-manifest', { name: 'w', state: 'state.json', actions: 'actions.json', module: 'tools.ts' }],
      ['env-manifest', { name: 'w', acions: 'actions.json', tools: { book: { timeout_ms: 'soon', retry: { attempts: -1 } } }, mcp_servers: { s: { url: 'not a uri at all' } } }],
      ['env-manifest', { name: 3, actions: 'a.json', tool_defaults: { idempotnt: true }, reward_sources: { judge: { kind: 'nope' } } }],
      ['action-schema', [{ name: 'get_weather', parameters: { type: 'object' }, enable_if: 'x' }]],
      ['action-schema', { actions: 'none' }],
      ['reward-schema', { properties: { ok: { type: 'number', delay_ms: 'late' } } }],
    ];
    // Validated by the validators compiled ahead, not compiled again.
    expect([compileSchema(metaSchema('env-manifest')), compileSchema(metaSchema('action-schema')), compileSchema(metaSchema('reward-schema'))]).toEqual([precompiled.envManifest, precompiled.actionSchema, precompiled.rewardSchema]);
    for (const [name, doc] of cases) expect(validate(metaSchema(name), doc, 'f.json')).toEqual(compiledNow(name, doc));
    // The cases above do reach the validators' errors, names and hints included.
    const issues = validate(metaSchema('env-manifest'), cases[1]?.[1], 'f.json');
    expect(issues.map((i) => i.pointer)).toEqual(expect.arrayContaining(['/acions', '/tools/book/timeout_ms', '/mcp_servers/s/url']));
    expect(issues.find((i) => i.pointer === '/acions')?.message).toMatch(/did you mean 'actions'/);
  });

  it("check a user's schema against its dialect as ajv's own meta-schema check does", () => {
    const fresh = createAjv();
    const checkedNow = (schema: object): unknown => (fresh.validateSchema(schema) ? [] : toIssues(fresh.errors ?? [], 's.json').map((i) => ({ ...i, pointer: `/p${i.pointer}`, message: `not a valid JSON Schema: ${i.message}` })));
    const schemas: object[] = [
      { type: 'object', properties: { a: { type: 'strng' }, b: { minimum: 'x' } }, required: 'a' },
      { type: 'object', properties: { nested: { items: { $defs: { d: { enum: 3 } } }, prefixItems: {} } } },
      { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { a: { type: 'integr' } }, dependencies: { a: 4 } },
      { $schema: 'http://json-schema.org/draft-07/schema#', definitions: { x: { anyOf: [] } } },
      { $schema: 'https://json-schema.org/draft/2020-12/schema', $defs: { t: { $dynamicAnchor: 3 } }, additionalProperties: 'no' },
      { type: 'object', properties: { ok: { type: 'number', description: 'fine' } } },
    ];
    for (const schema of schemas) expect(checkSchema(schema, 's.json', '/p')).toEqual(checkedNow(schema));
    expect(checkSchema(schemas[0], 's.json', '/p').map((i) => i.pointer)).toEqual(expect.arrayContaining(['/p/properties/a/type', '/p/properties/b/minimum', '/p/required']));
    expect(checkSchema(schemas[2], 's.json', '/p').map((i) => i.pointer)).toEqual(expect.arrayContaining(['/p/properties/a/type']));
  });
});

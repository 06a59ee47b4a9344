/**
 * The toolkit's ajv setup: validators called with a shared context must answer exactly as ajv does
 * with a fresh one per call, and a subschema compiled on its own exactly as through its root.
 */
import Ajv2020Module from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { compileSchema, compileSubschema, validate, validateWith, type JsonSchema } from './ajv.js';

const Ajv2020 = Ajv2020Module.default;

/** What ajv itself answers, from an instance of its own (each call building its own context). */
function reference(schema: JsonSchema): (value: unknown) => boolean {
  const v = new Ajv2020({ strict: false, allErrors: true, allowUnionTypes: true }).compile(schema);
  return (value) => v(value);
}

describe('validators', () => {
  it('answer as ajv does, call after call, on a schema whose $dynamicRef depends on the data', () => {
    // A tree whose nodes' data is extended by the schema that refers to it (JSON Schema 2020-12, §8.2.3.2).
    const tree = { $id: 'https://example.test/tree', $dynamicAnchor: 'node', type: 'object', properties: { data: true, children: { type: 'array', items: { $dynamicRef: '#node' } } } };
    const strict = {
      $id: 'https://example.test/strict-tree',
      $dynamicAnchor: 'node',
      $ref: 'tree',
      unevaluatedProperties: false,
      $defs: { tree },
    };
    const ours = compileSchema(strict);
    const theirs = reference(strict);
    const values = [{ children: [{ daat: 1 }] }, { children: [{ data: 1 }] }, { data: 2 }, { children: [{ children: [{ extra: true }] }] }, { children: [] }, { children: [{ data: 1, more: 2 }] }];
    for (let round = 0; round < 3; round++) for (const v of values) expect(validateWith(ours, v).length === 0).toBe(theirs(v));
  });

  it('answer as ajv does on a schema with local $refs, for valid and invalid values in turn', () => {
    const schema = {
      type: 'object',
      properties: { a: { $ref: '#/$defs/n' }, b: { type: 'array', items: { $ref: '#/$defs/n' } }, c: { $ref: '#/properties/a' } },
      $defs: { n: { type: 'integer', minimum: 0 } },
      additionalProperties: false,
    };
    const theirs = reference(schema);
    const values = [{ a: 1 }, { a: -1 }, { b: [1, 2, 'x'] }, { c: 3, b: [] }, { d: 1 }, { a: 1.5 }, {}];
    for (let round = 0; round < 2; round++) for (const v of values) expect(validate(schema, v).length === 0).toBe(theirs(v));
    expect(validate(schema, { a: 1, b: [0, -2] })).toEqual([expect.objectContaining({ pointer: '/b/1' })]);
  });
});

describe('compileSubschema', () => {
  const root = {
    type: 'object',
    properties: {
      counter: { type: 'integer', minimum: 0 },
      owner: { $ref: '#/$defs/person' },
      tags: { type: 'array', items: { type: 'string', maxLength: 3 } },
    },
    $defs: { person: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } },
  };

  it('compiles a subschema that refers to nothing on its own, one with a $ref through its root: both answer as the root would', () => {
    const cases: [string, unknown, string[]][] = [
      ['/properties/counter', 3, []],
      ['/properties/counter', -1, ['']],
      ['/properties/counter', 'x', ['']],
      ['/properties/tags', ['ab', 'abcd', 7], ['/1', '/2']],
      ['/properties/owner', { name: 'Ada' }, []],
      ['/properties/owner', {}, ['/name']],
      ['/properties/owner', { name: 1 }, ['/name']],
    ];
    for (const [pointer, value, pointers] of cases) {
      const issues = validateWith(compileSubschema(root, pointer), value, undefined, root);
      expect(issues.map((i) => i.pointer).sort(), `${pointer} ${JSON.stringify(value)}`).toEqual(pointers);
    }
    // The same validator object each time: compiled once per subschema.
    expect(compileSubschema(root, '/properties/counter')).toBe(compileSubschema(root, '/properties/counter'));
  });
});

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { boundaries, compileSchema, generate, generateSamples, mutants, parseActionDocument, Rng, validate, type JsonSchema } from '../internal.js';

const real = (f: string): unknown => JSON.parse(readFileSync(`fixtures/realworld/${f}`, 'utf8'));

// Schemas json-schema-faker 0.6 gets wrong; each must yield valid values every time.
const hard: Record<string, JsonSchema> = {
  'recursive $ref': { $defs: { Node: { type: 'object', properties: { value: { type: 'integer' }, children: { type: 'array', items: { $ref: '#/$defs/Node' } } }, required: ['value', 'children'] } }, $ref: '#/$defs/Node' },
  allOf: { allOf: [{ type: 'object', properties: { a: { type: 'string', minLength: 2 } }, required: ['a'] }, { properties: { b: { type: 'integer', minimum: 5 } }, required: ['b'] }] },
  'if/then/else': { type: 'object', properties: { kind: { enum: ['card', 'cash'] }, number: { type: 'string', pattern: '^[0-9]{4}$' } }, required: ['kind'], if: { properties: { kind: { const: 'card' } } }, then: { required: ['number'] }, else: { not: { required: ['number'] } } },
  'oneOf with overlapping branches': { oneOf: [{ type: 'integer', multipleOf: 2 }, { type: 'integer', multipleOf: 3 }] },
  not: { type: 'string', not: { enum: ['', 'admin'] }, maxLength: 5 },
  propertyNames: { type: 'object', propertyNames: { pattern: '^[a-z]+$' }, additionalProperties: { type: 'integer' }, minProperties: 1 },
  'lookahead pattern': { type: 'string', pattern: '^(?=.*[0-9])[a-z0-9]{3,8}$' },
  'unicode property pattern': { type: 'string', pattern: '^\\p{L}+$' },
  'fractional multipleOf': { type: 'number', multipleOf: 0.1, minimum: 0.3, maximum: 2 },
  'dependentRequired and dependentSchemas': { type: 'object', properties: { card: { type: 'string' }, cvv: { type: 'string', pattern: '^[0-9]{3}$' } }, dependentRequired: { card: ['cvv'] } },
  'uniqueItems and contains': { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 }, uniqueItems: true, contains: { const: 7 }, minItems: 2, maxItems: 5 },
};

describe('generate', () => {
  it.each(Object.entries(hard))('%s: every draw is valid', (_name, schema) => {
    const rng = new Rng(11);
    const check = compileSchema(schema);
    for (let i = 0; i < 25; i++) {
      const g = generate(schema, rng);
      expect(g.value, JSON.stringify(g)).toBeDefined();
      expect(check(g.value)).toBe(true);
    }
  });

  it('is deterministic for a seed', () => {
    const a = generateSamples(hard['recursive $ref'] as JsonSchema, 5, { seed: 3 });
    const b = generateSamples(hard['recursive $ref'] as JsonSchema, 5, { seed: 3 });
    expect(a).toEqual(b);
    expect(generateSamples(hard['recursive $ref'] as JsonSchema, 5, { seed: 4 })).not.toEqual(a);
  });

  it('yields valid parameters for every BFCL function that admits a value (share reported)', () => {
    const fns = real('bfcl/bfcl-functions-normalized.json') as object[];
    let admits = 0;
    let ok = 0;
    fns.forEach((fn, i) => {
      const action = parseActionDocument([fn], { file: 'bfcl' }).actions[0];
      if (!action || action.unsatisfiable) return;
      admits++;
      const check = compileSchema(action.parameters);
      const g = generate(action.parameters, new Rng(i));
      if (g.value !== undefined && check(g.value)) ok++;
    });
    expect(admits).toBe(3417);
    expect(ok / admits).toBe(1);
  });

  it("reproduces BFCL's ground-truth split: 3,098 valid calls, 204 real mismatches, each located", () => {
    const fns = real('bfcl/bfcl-functions-normalized.json') as { parameters: JsonSchema }[];
    const items = (real('bfcl/bfcl-ground-truth-calls.json') as { items: { calls: { function_index: number; arguments: unknown; validates_against_normalized: boolean; first_error: string | null }[] }[] }).items;
    let valid = 0;
    let invalid = 0;
    for (const call of items.flatMap((i) => i.calls)) {
      const issues = validate((fns[call.function_index] as { parameters: JsonSchema }).parameters, call.arguments);
      expect(issues.length === 0).toBe(call.validates_against_normalized);
      if (issues.length === 0) valid++;
      else {
        invalid++;
        // Each mismatch names its field; BFCL's own note names the same place. (BFCL locates a missing
        // parameter at its parent object, "/"; we name the missing key itself.)
        const err = call.first_error ?? '';
        const missing = /^required: '([^']+)'/.exec(err)?.[1];
        const expected = missing !== undefined ? `/${missing}` : /at (\/\S*)$/.exec(err)?.[1];
        expect(issues.map((i) => i.pointer)).toContain(expected);
      }
    }
    expect([valid, invalid]).toEqual([3098, 204]);
  });
});

describe('mutants and boundaries', () => {
  const tools = real('tau-bench-airline-tools.json') as { name: string; parameters: JsonSchema }[];
  it.each(tools.map((t) => [t.name, t.parameters] as const))('%s: every mutant is invalid and names a pointer ajv also names', (_name, schema) => {
    const rng = new Rng(5);
    const base = generate(schema, rng).value;
    expect(base).toBeDefined();
    for (const m of mutants(schema, base ?? {}, rng, 30)) {
      const issues = validate(schema, m.value);
      expect(issues.length).toBeGreaterThan(0);
      expect(issues.some((i) => i.pointer === m.pointer || i.pointer.startsWith(`${m.pointer}/`) || m.pointer.startsWith(`${i.pointer}/`) || i.pointer === m.pointer)).toBe(true);
    }
  });

  it('puts values just inside and just outside every bound', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 1, maximum: 9 }, x: { type: 'number', exclusiveMaximum: 2 }, s: { type: 'string', minLength: 2, maxLength: 3 }, a: { type: 'array', maxItems: 2 } } };
    const b = boundaries(schema, { n: 5, x: 1, s: 'ab', a: [1] });
    const at = (pointer: string, valid: boolean): unknown[] => b.filter((v) => v.pointer === pointer && v.valid === valid).map((v) => (v.value as Record<string, unknown>)[pointer.slice(1)]);
    expect(at('/n', true)).toEqual([1, 9]);
    expect(at('/n', false)).toEqual([0, 10]);
    expect(at('/x', false)).toEqual([2]);
    expect(at('/s', true)).toEqual(['ab', 'aba']);
    expect(at('/s', false)).toEqual(['a', 'abab']);
    expect(at('/a', false)).toEqual([[1, 1, 1]]);
  });

  it('--invalid samples are all invalid, each breaking one named rule', () => {
    const schema = real('tau-bench-retail-tools.json') as { parameters: JsonSchema }[];
    const { samples } = generateSamples((schema[0] as { parameters: JsonSchema }).parameters, 20, { invalid: true, seed: 9 });
    expect(samples).toHaveLength(20);
    for (const s of samples) {
      expect(s.valid).toBe(false);
      expect(validate((schema[0] as { parameters: JsonSchema }).parameters, s.value).length).toBeGreaterThan(0);
      expect(s.mutation).toBeDefined();
    }
  });
});

// Keywords in combination, at any depth: each schema is satisfiable, so it must yield values that
// are right both ways: every valid one accepted, every invalid one rejected, and never zero of either.
const combinations: Record<string, JsonSchema> = {
  'contains with minContains, deep': { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 }, contains: { minimum: 8 }, minContains: 2 } }, required: ['b'] } }, required: ['a'] },
  'contains with maxContains': { type: 'array', contains: { const: 'x' }, maxContains: 1, minItems: 4, items: { enum: ['x', 'y', 'z'] } },
  'uniqueItems over every value of a small enum': { type: 'array', items: { enum: [1, 2, 3, 4, 5] }, uniqueItems: true, minItems: 5 },
  'uniqueItems over booleans': { type: 'array', items: { type: 'boolean' }, uniqueItems: true, minItems: 2 },
  'allOf of numeric keywords': { allOf: [{ type: 'number', minimum: 1 }, { type: 'integer' }, { maximum: 3 }, { not: { const: 2 } }] },
  'allOf of string keywords': { allOf: [{ type: 'string', pattern: '^[a-c]+$' }, { minLength: 4 }, { maxLength: 4 }] },
  'allOf of array keywords': { allOf: [{ type: 'array', items: { type: 'integer' } }, { minItems: 3 }, { uniqueItems: true }, { items: { minimum: 0, maximum: 2 } }] },
  'allOf of $ref branches, unevaluatedProperties': { $defs: { A: { properties: { a: { type: 'integer' } }, required: ['a'] }, B: { properties: { b: { type: 'string' } }, required: ['b'] } }, type: 'object', allOf: [{ $ref: '#/$defs/A' }, { $ref: '#/$defs/B' }], unevaluatedProperties: false },
  'if/then/else with not': { type: 'object', properties: { t: { enum: ['a', 'b'] }, n: { type: 'integer' } }, required: ['t', 'n'], if: { properties: { t: { const: 'a' } } }, then: { properties: { n: { not: { minimum: 0 } } } }, else: { properties: { n: { minimum: 100 } } } },
  'unevaluatedItems after prefixItems': { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], unevaluatedItems: false, minItems: 2 },
  'closed object with patternProperties': { type: 'object', patternProperties: { '^x-[a-z]+$': { type: 'integer' } }, additionalProperties: false, minProperties: 2 },
  'fractional multipleOf with one multiple in range': { type: 'number', multipleOf: 0.1, minimum: 0.25, maximum: 0.35 },
  'contains without type': { contains: { minimum: 5 } },
  'no type at all': { minimum: 5 },
  propertyNames: { type: 'object', propertyNames: { pattern: '^[a-z]{2}$' }, minProperties: 2 },
  'dependentSchemas and dependentRequired': { type: 'object', properties: { a: { type: 'string' } }, dependentSchemas: { a: { required: ['b'] } }, dependentRequired: { b: ['c'] } },
};

describe('keywords in combination', () => {
  it.each(Object.entries(combinations))('%s: valid and invalid values, all right', (_name, schema) => {
    const valid = generateSamples(schema, 15, { seed: 3 });
    expect(valid.samples).toHaveLength(15);
    for (const s of valid.samples) expect(validate(schema, s.value), JSON.stringify(s.value)).toEqual([]);
    const invalid = generateSamples(schema, 15, { seed: 3, invalid: true });
    expect(invalid.samples).toHaveLength(15);
    for (const s of invalid.samples) {
      expect(validate(schema, s.value).length, JSON.stringify(s.value)).toBeGreaterThan(0);
      expect(typeof s.pointer).toBe('string');
    }
  });

  it('says so when a schema is truly unsatisfiable', () => {
    expect(() => generateSamples({ type: 'integer', minimum: 5, maximum: 1 }, 3)).toThrow(expect.objectContaining({ code: 'ACTION_UNSATISFIABLE' }));
  });
});

import { describe, expect, it } from 'vitest';
import { compileSchema, diffEnvFolders, diffSchema, RULES, type DiffKind, type DiffMode, type Finding, type JsonSchema } from '../internal.js';

const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ type: 'object', properties, ...extra });
const x = (s: unknown): Record<string, unknown> => obj({ x: s });

interface Case {
  readonly name: string;
  readonly kind: DiffKind;
  readonly old: JsonSchema;
  readonly new: JsonSchema;
  /** Rule ids of the breaking findings, sorted. Empty: compatible. */
  readonly breaking: readonly string[];
  /** The witness we expect, when one is forced (checked with ajv either way). */
  readonly witness?: unknown;
  readonly warnings?: readonly string[];
  readonly mode?: DiffMode;
  readonly tolerant?: boolean;
}

// Actions: policies produce, the env consumes. Tightening breaks.
const actionCases: Case[] = [
  { name: 'type narrowed', kind: 'action', old: x({ type: ['string', 'number'] }), new: x({ type: 'string' }), breaking: ['type-narrowed'], witness: { x: 0 } },
  { name: 'type widened', kind: 'action', old: x({ type: 'string' }), new: x({ type: ['string', 'number'] }), breaking: [] },
  { name: 'type replaced', kind: 'action', old: x({ type: 'string' }), new: x({ type: 'integer' }), breaking: ['type-changed'], witness: { x: 'a' } },
  { name: 'number to integer', kind: 'action', old: x({ type: 'number' }), new: x({ type: 'integer' }), breaking: ['type-narrowed'], witness: { x: 0.5 } },
  { name: 'integer to number', kind: 'action', old: x({ type: 'integer' }), new: x({ type: 'number' }), breaking: [] },
  { name: 'null removed from a type list', kind: 'action', old: x({ type: ['string', 'null'] }), new: x({ type: 'string' }), breaking: ['nullability-removed'], witness: { x: null } },
  { name: 'null removed from anyOf', kind: 'action', old: x({ anyOf: [{ type: 'string' }, { type: 'null' }] }), new: x({ type: 'string' }), breaking: ['nullability-removed'], witness: { x: null } },
  { name: 'null removed from oneOf', kind: 'action', old: x({ oneOf: [{ type: 'null' }, { type: 'integer' }] }), new: x({ type: 'integer' }), breaking: ['nullability-removed'], witness: { x: null } },
  { name: 'nullable: true removed', kind: 'action', old: x({ type: 'string', nullable: true }), new: x({ type: 'string' }), breaking: ['nullability-removed'], witness: { x: null } },
  { name: 'null added', kind: 'action', old: x({ type: 'string' }), new: x({ type: ['string', 'null'] }), breaking: [] },
  { name: 'enum value removed', kind: 'action', old: x({ enum: ['a', 'b', 'c'] }), new: x({ enum: ['a', 'b'] }), breaking: ['enum-value-removed'], witness: { x: 'c' } },
  { name: 'enum value added', kind: 'action', old: x({ enum: ['a'] }), new: x({ enum: ['a', 'b'] }), breaking: [] },
  { name: 'enum added to a free string', kind: 'action', old: x({ type: 'string' }), new: x({ type: 'string', enum: ['a', 'b'] }), breaking: ['enum-added'] },
  { name: 'enum dropped', kind: 'action', old: x({ type: 'string', enum: ['a', 'b'] }), new: x({ type: 'string' }), breaking: [] },
  { name: 'const changed', kind: 'action', old: x({ const: 'v1' }), new: x({ const: 'v2' }), breaking: ['enum-value-removed'], witness: { x: 'v1' } },
  { name: 'minimum raised', kind: 'action', old: x({ type: 'integer', minimum: 0 }), new: x({ type: 'integer', minimum: 5 }), breaking: ['minimum-raised'], witness: { x: 0 } },
  { name: 'minimum lowered', kind: 'action', old: x({ type: 'integer', minimum: 5 }), new: x({ type: 'integer', minimum: 0 }), breaking: [] },
  { name: 'minimum made exclusive', kind: 'action', old: x({ type: 'number', minimum: 0 }), new: x({ type: 'number', exclusiveMinimum: 0 }), breaking: ['minimum-raised'], witness: { x: 0 } },
  { name: 'minimum set where none was', kind: 'action', old: x({ type: 'number' }), new: x({ type: 'number', minimum: 1 }), breaking: ['minimum-raised'] },
  { name: 'maximum lowered', kind: 'action', old: x({ type: 'integer', maximum: 100 }), new: x({ type: 'integer', maximum: 50 }), breaking: ['maximum-lowered'], witness: { x: 100 } },
  { name: 'maximum removed', kind: 'action', old: x({ type: 'integer', maximum: 100 }), new: x({ type: 'integer' }), breaking: [] },
  { name: 'exclusiveMaximum tightened', kind: 'action', old: x({ type: 'number', exclusiveMaximum: 10 }), new: x({ type: 'number', exclusiveMaximum: 5 }), breaking: ['maximum-lowered'] },
  { name: 'multipleOf added', kind: 'action', old: x({ type: 'number' }), new: x({ type: 'number', multipleOf: 2 }), breaking: ['multiple-of-added'] },
  { name: 'fractional multipleOf coarser', kind: 'action', old: x({ type: 'number', multipleOf: 0.1 }), new: x({ type: 'number', multipleOf: 0.2 }), breaking: ['multiple-of-changed'], witness: { x: 0.1 } },
  { name: 'fractional multipleOf finer', kind: 'action', old: x({ type: 'number', multipleOf: 0.2 }), new: x({ type: 'number', multipleOf: 0.1 }), breaking: [] },
  { name: 'integer multipleOf 2 → 4', kind: 'action', old: x({ type: 'integer', multipleOf: 2 }), new: x({ type: 'integer', multipleOf: 4 }), breaking: ['multiple-of-changed'], witness: { x: 2 } },
  { name: 'integer multipleOf 4 → 2', kind: 'action', old: x({ type: 'integer', multipleOf: 4 }), new: x({ type: 'integer', multipleOf: 2 }), breaking: [] },
  { name: 'minLength raised', kind: 'action', old: x({ type: 'string' }), new: x({ type: 'string', minLength: 3 }), breaking: ['string-length-min-raised'] },
  { name: 'maxLength lowered', kind: 'action', old: x({ type: 'string', maxLength: 10 }), new: x({ type: 'string', maxLength: 4 }), breaking: ['string-length-max-lowered'] },
  { name: 'maxLength removed', kind: 'action', old: x({ type: 'string', maxLength: 10 }), new: x({ type: 'string' }), breaking: [] },
  { name: 'pattern added', kind: 'action', old: x({ type: 'string' }), new: x({ type: 'string', pattern: '^[A-Z]{3}$' }), breaking: ['pattern-added'] },
  { name: 'pattern removed', kind: 'action', old: x({ type: 'string', pattern: '^[A-Z]{3}$' }), new: x({ type: 'string' }), breaking: [] },
  { name: 'pattern anchored (unanchored patterns match substrings)', kind: 'action', old: x({ type: 'string', pattern: '[a-z]+' }), new: x({ type: 'string', pattern: '^[a-z]+$' }), breaking: ['pattern-changed'] },
  { name: 'pattern unanchored: looser, no witness, never breaking', kind: 'action', old: x({ type: 'string', pattern: '^[a-z]+$' }), new: x({ type: 'string', pattern: '[a-z]+' }), breaking: [], warnings: ['pattern-changed'] },
  // The anchoring family: a witness needs a prefix or a suffix the old pattern tolerated.
  { name: 'pattern anchored at both ends (\\d{4} → ^\\d{4}$)', kind: 'action', old: x({ type: 'string', pattern: '\\d{4}' }), new: x({ type: 'string', pattern: '^\\d{4}$' }), breaking: ['pattern-changed'] },
  { name: 'pattern anchored at the end', kind: 'action', old: x({ type: 'string', pattern: '^\\d{4}' }), new: x({ type: 'string', pattern: '^\\d{4}$' }), breaking: ['pattern-changed'] },
  { name: 'pattern anchored at the start', kind: 'action', old: x({ type: 'string', pattern: '\\d{4}$' }), new: x({ type: 'string', pattern: '^\\d{4}$' }), breaking: ['pattern-changed'] },
  { name: 'pattern alternation narrowed', kind: 'action', old: x({ type: 'string', pattern: '^(a|b|c)$' }), new: x({ type: 'string', pattern: '^(a|b)$' }), breaking: ['pattern-changed'], witness: { x: 'c' } },
  { name: 'pattern quantifier bounded', kind: 'action', old: x({ type: 'string', pattern: '^a+$' }), new: x({ type: 'string', pattern: '^a{1,3}$' }), breaking: ['pattern-changed'], witness: { x: 'aaaa' } },
  { name: 'pattern quantifier given a lower bound', kind: 'action', old: x({ type: 'string', pattern: '^[a-z]+$' }), new: x({ type: 'string', pattern: '^[a-z]{2,}$' }), breaking: ['pattern-changed'] },
  { name: 'pattern alternation widened', kind: 'action', old: x({ type: 'string', pattern: '^(a|b)$' }), new: x({ type: 'string', pattern: '^(a|b|c)$' }), breaking: [], warnings: ['pattern-changed'] },
  { name: 'format added', kind: 'action', old: x({ type: 'string' }), new: x({ type: 'string', format: 'date' }), breaking: ['format-added'] },
  { name: 'format removed', kind: 'action', old: x({ type: 'string', format: 'date' }), new: x({ type: 'string' }), breaking: [] },
  { name: 'required added', kind: 'action', old: obj({ a: { type: 'string' } }), new: obj({ a: { type: 'string' } }, { required: ['a'] }), breaking: ['required-added'], witness: {} },
  { name: 'required removed', kind: 'action', old: obj({ a: { type: 'string' } }, { required: ['a'] }), new: obj({ a: { type: 'string' } }), breaking: [] },
  { name: 'property added to a closed object', kind: 'action', old: obj({ a: { type: 'string' } }, { additionalProperties: false }), new: obj({ a: { type: 'string' }, b: { type: 'string' } }, { additionalProperties: false }), breaking: [] },
  { name: 'property removed from a closed object', kind: 'action', old: obj({ a: { type: 'string' }, b: { type: 'string' } }, { additionalProperties: false }), new: obj({ a: { type: 'string' } }, { additionalProperties: false }), breaking: ['property-removed'], witness: { b: 'a' } },
  { name: 'property removed from an open object', kind: 'action', old: obj({ a: { type: 'string' } }), new: obj({}), breaking: [] },
  { name: 'property declared on an open object', kind: 'action', old: obj({}), new: obj({ a: { type: 'string' } }), breaking: ['constraints-added'] },
  { name: 'object closed', kind: 'action', old: obj({ a: { type: 'string' } }), new: obj({ a: { type: 'string' } }, { additionalProperties: false }), breaking: ['object-closed'] },
  { name: 'object opened', kind: 'action', old: obj({ a: { type: 'string' } }, { additionalProperties: false }), new: obj({ a: { type: 'string' } }), breaking: [] },
  { name: 'map values narrowed', kind: 'action', old: x({ type: 'object', additionalProperties: { type: 'number' } }), new: x({ type: 'object', additionalProperties: { type: 'integer' } }), breaking: ['type-narrowed'] },
  { name: 'minItems raised', kind: 'action', old: x({ type: 'array', items: { type: 'string' } }), new: x({ type: 'array', items: { type: 'string' }, minItems: 1 }), breaking: ['item-count-min-raised'], witness: { x: [] } },
  { name: 'maxItems lowered', kind: 'action', old: x({ type: 'array', maxItems: 5 }), new: x({ type: 'array', maxItems: 2 }), breaking: ['item-count-max-lowered'] },
  { name: 'uniqueItems added', kind: 'action', old: x({ type: 'array', items: { type: 'integer' } }), new: x({ type: 'array', items: { type: 'integer' }, uniqueItems: true }), breaking: ['unique-items-added'], witness: { x: [0, 0] } },
  { name: 'items narrowed deep in arrays of objects', kind: 'action', old: x({ type: 'array', items: obj({ id: { type: 'string' } }) }), new: x({ type: 'array', items: obj({ id: { type: 'string', minLength: 3 } }) }), breaking: ['string-length-min-raised'] },
  { name: 'nested arrays of objects', kind: 'action', old: x({ type: 'array', items: obj({ legs: { type: 'array', items: obj({ n: { type: 'integer', maximum: 9 } }) } }) }), new: x({ type: 'array', items: obj({ legs: { type: 'array', items: obj({ n: { type: 'integer', maximum: 3 } }) } }) }), breaking: ['maximum-lowered'] },
  { name: 'prefixItems tightened', kind: 'action', old: x({ type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }] }), new: x({ type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }] }), breaking: ['type-narrowed'] },
  { name: 'contains added', kind: 'action', old: x({ type: 'array' }), new: x({ type: 'array', contains: { const: 'x' } }), breaking: ['contains-added'], witness: { x: [] } },
  { name: 'minProperties raised', kind: 'action', old: x({ type: 'object' }), new: x({ type: 'object', minProperties: 1 }), breaking: ['property-count-min-raised'], witness: { x: {} } },
  { name: 'maxProperties lowered', kind: 'action', old: x({ type: 'object', maxProperties: 3 }), new: x({ type: 'object', maxProperties: 1 }), breaking: ['property-count-max-lowered'] },
  { name: 'dependentRequired added', kind: 'action', old: obj({ card: { type: 'string' }, cvv: { type: 'string' } }), new: obj({ card: { type: 'string' }, cvv: { type: 'string' } }, { dependentRequired: { card: ['cvv'] } }), breaking: ['dependent-required-added'], witness: { card: 'a' } },
  { name: 'dependentSchemas added', kind: 'action', old: obj({ card: { type: 'string' }, cvv: { type: 'string' } }), new: obj({ card: { type: 'string' }, cvv: { type: 'string' } }, { dependentSchemas: { card: { required: ['cvv'] } } }), breaking: ['dependent-schemas-changed'], witness: { card: 'a' } },
  { name: 'propertyNames added', kind: 'action', old: obj({}), new: obj({}, { propertyNames: { pattern: '^[a-z]+$' } }), breaking: ['property-names-changed'] },
  { name: 'patternProperties values narrowed', kind: 'action', old: obj({}, { patternProperties: { '^x-': { type: 'string' } } }), new: obj({}, { patternProperties: { '^x-': { type: 'integer' } } }), breaking: ['pattern-properties-changed'] },
  { name: 'else branch added', kind: 'action', old: obj({ a: { type: 'string' } }), new: obj({ a: { type: 'string' } }, { if: { required: ['a'] }, then: {}, else: { required: ['b'] } }), breaking: ['conditional-changed'], witness: {} },
  { name: 'oneOf with overlapping branches', kind: 'action', old: x({ type: 'integer' }), new: x({ oneOf: [{ type: 'integer' }, { type: 'number' }] }), breaking: ['one-of-overlap'] },
  { name: 'oneOf with disjoint branches', kind: 'action', old: x({ type: 'string' }), new: x({ oneOf: [{ type: 'string' }, { type: 'integer' }] }), breaking: [] },
  { name: 'anyOf branch removed', kind: 'action', old: x({ anyOf: [{ type: 'string' }, { type: 'integer' }] }), new: x({ anyOf: [{ type: 'string' }, { type: 'boolean' }] }), breaking: ['any-of-narrowed'], witness: { x: 0 } },
  { name: 'allOf adds a constraint', kind: 'action', old: x({ type: 'string' }), new: x({ allOf: [{ type: 'string' }, { minLength: 2 }] }), breaking: ['string-length-min-raised'] },
  { name: 'not added', kind: 'action', old: x({ type: 'string' }), new: x({ type: 'string', not: { const: '' } }), breaking: ['not-added'] },
  { name: 'if/then added', kind: 'action', old: obj({ a: { type: 'string' }, b: { type: 'string' } }), new: obj({ a: { type: 'string' }, b: { type: 'string' } }, { if: { required: ['a'] }, then: { required: ['b'] } }), breaking: ['conditional-changed'] },
  { name: 'moved inline → $defs is no change', kind: 'action', old: x({ type: 'object', properties: { n: { type: 'integer', minimum: 1 } } }), new: { $defs: { N: { type: 'object', properties: { n: { type: 'integer', minimum: 1 } } } }, type: 'object', properties: { x: { $ref: '#/$defs/N' } } }, breaking: [] },
  { name: 'recursive $ref, change deep inside', kind: 'action', old: { $defs: { Node: obj({ v: { type: 'integer' }, next: { $ref: '#/$defs/Node' } }) }, $ref: '#/$defs/Node' }, new: { $defs: { Node: obj({ v: { type: 'integer', minimum: 0 }, next: { $ref: '#/$defs/Node' } }) }, $ref: '#/$defs/Node' }, breaking: ['minimum-raised'] },
  { name: 'recursive $ref unchanged', kind: 'action', old: { $defs: { Node: obj({ next: { $ref: '#/$defs/Node' } }) }, $ref: '#/$defs/Node' }, new: { $defs: { T: obj({ next: { $ref: '#/$defs/T' } }) }, $ref: '#/$defs/T' }, breaking: [] },
  { name: 'annotations only', kind: 'action', old: x({ type: 'string', title: 'X', description: 'old', examples: ['a'] }), new: x({ type: 'string', title: 'Y', description: 'new', $comment: 'c', deprecated: true }), breaking: [] },
  { name: 'default changed (a warning)', kind: 'action', old: x({ type: 'integer', default: 10 }), new: x({ type: 'integer', default: 20 }), breaking: [], warnings: ['default-changed'] },
  { name: 'draft-07 $schema on both sides', kind: 'action', old: { $schema: 'http://json-schema.org/draft-07/schema#', ...x({ type: 'number' }) }, new: { $schema: 'http://json-schema.org/draft-07/schema#', ...x({ type: 'number', maximum: 3 }) }, breaking: ['maximum-lowered'] },
];

// State: the env produces, policies and trainers consume. Loosening breaks.
const stateCases: Case[] = [
  { name: 'state: pattern unanchored (the env may now produce "x1234")', kind: 'state', old: x({ type: 'string', pattern: '^\\d{4}$' }), new: x({ type: 'string', pattern: '\\d{4}' }), breaking: ['pattern-changed'] },
  { name: 'state: null allowed', kind: 'state', old: x({ type: 'string' }), new: x({ type: ['string', 'null'] }), breaking: ['nullability-added'], witness: { x: null } },
  { name: 'state: maximum raised', kind: 'state', old: x({ type: 'integer', maximum: 5 }), new: x({ type: 'integer', maximum: 9 }), breaking: ['maximum-raised'] },
  { name: 'state: tightened is safe', kind: 'state', old: x({ type: 'integer' }), new: x({ type: 'integer', minimum: 0 }), breaking: [] },
  { name: 'state: required removed', kind: 'state', old: obj({ a: { type: 'string' } }, { required: ['a'] }), new: obj({ a: { type: 'string' } }), breaking: ['required-removed'], witness: {} },
  { name: 'state: property added to a closed object', kind: 'state', old: obj({ a: { type: 'string' } }, { additionalProperties: false }), new: obj({ a: { type: 'string' }, b: { type: 'integer' } }, { additionalProperties: false }), breaking: ['property-added'] },
  { name: 'state: object opened', kind: 'state', old: obj({ a: { type: 'string' } }, { additionalProperties: false }), new: obj({ a: { type: 'string' } }), breaking: ['object-opened'] },
  { name: 'state: enum value added', kind: 'state', old: x({ enum: ['ok', 'error'] }), new: x({ enum: ['ok', 'error', 'retry'] }), breaking: ['enum-value-added'], witness: { x: 'retry' } },
  { name: 'state: declared property dropped from an open object', kind: 'state', old: obj({ a: { type: 'string' } }), new: obj({}), breaking: ['constraints-removed'] },
  { name: 'state: integer widened to number', kind: 'state', old: x({ type: 'integer' }), new: x({ type: 'number' }), breaking: ['type-widened'], witness: { x: 0.5 } },
];

// Rewards: the env produces, trainers consume.
const rewardCases: Case[] = [
  { name: 'reward: range widened', kind: 'reward', old: { type: 'number', minimum: 0, maximum: 1 }, new: { type: 'number', minimum: 0, maximum: 10 }, breaking: ['maximum-raised'], witness: 10 },
  { name: 'reward: range narrowed is safe', kind: 'reward', old: { type: 'number', minimum: -1, maximum: 1 }, new: { type: 'number', minimum: 0, maximum: 1 }, breaking: [] },
  { name: 'reward: boolean to number', kind: 'reward', old: { type: 'boolean' }, new: { type: ['boolean', 'number'] }, breaking: ['type-widened'] },
];

// Modes.
const modeCases: Case[] = [
  { name: 'full: a loosened action breaks stored trajectories', kind: 'action', mode: 'full', old: x({ type: 'integer', maximum: 5 }), new: x({ type: 'integer', maximum: 9 }), breaking: ['maximum-raised'] },
  { name: 'full: tightened action still breaks', kind: 'action', mode: 'full', old: x({ type: 'integer', maximum: 9 }), new: x({ type: 'integer', maximum: 5 }), breaking: ['maximum-lowered'] },
  { name: 'forward forced on an action', kind: 'action', mode: 'forward', old: x({ type: 'integer', maximum: 9 }), new: x({ type: 'integer', maximum: 5 }), breaking: [] },
  { name: 'backward forced on state', kind: 'state', mode: 'backward', old: x({ type: 'integer', maximum: 9 }), new: x({ type: 'integer', maximum: 5 }), breaking: ['maximum-lowered'] },
  { name: 'tolerant: closing an object is not breaking', kind: 'action', tolerant: true, old: obj({ a: { type: 'string' } }), new: obj({ a: { type: 'string' } }, { additionalProperties: false }), breaking: [] },
];

const corpus = [...actionCases, ...stateCases, ...rewardCases, ...modeCases];

function checkWitness(c: Case, f: Finding): void {
  const [valid, invalid] = f.witness_valid_in === 'old' ? [c.old, c.new] : [c.new, c.old];
  expect(compileSchema(valid)(f.witness), `${f.rule}: witness valid on the ${f.witness_valid_in} side`).toBe(true);
  expect(compileSchema(invalid)(f.witness), `${f.rule}: witness invalid on the other side`).toBe(false);
}

describe('schema-diff corpus', () => {
  it('has at least 60 pairs across the three kinds', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(60);
    expect(new Set(corpus.map((c) => c.kind))).toEqual(new Set(['action', 'state', 'reward']));
  });

  it.each(corpus.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const findings = diffSchema(c.old, c.new, c.kind, { ...(c.mode ? { mode: c.mode } : {}), ...(c.tolerant ? { tolerant: true } : {}) });
    const breaking = findings.filter((f) => f.severity === 'breaking');
    expect([...new Set(breaking.map((f) => f.rule))].sort()).toEqual([...c.breaking].sort());
    for (const f of breaking) {
      expect(f.witness, `${f.rule} has a witness`).toBeDefined();
      checkWitness(c, f);
      expect(f.message).toMatch(/: .*(policies|trainers|stored trajectories|rejected)/);
    }
    if (c.witness !== undefined) {
      // The witness we expected is a real one, and the differ found one of the same shape.
      const side = breaking[0]?.witness_valid_in ?? (c.kind === 'action' ? 'old' : 'new');
      checkWitness(c, { ...(breaking[0] as Finding), witness: c.witness, witness_valid_in: side });
      expect(breaking.map((f) => f.witness)).toContainEqual(c.witness);
    }
    if (c.warnings) expect(findings.filter((f) => f.severity === 'warning').map((f) => f.rule)).toEqual(c.warnings);
  });
});

describe('rule catalogue', () => {
  it('documents every rule id the differ reports', async () => {
    const seen = new Set<string>();
    for (const c of corpus) {
      for (const mode of ['default', 'full'] as const) for (const f of diffSchema(c.old, c.new, c.kind, { mode })) seen.add(f.rule);
      for (const f of diffSchema(c.new, c.old, c.kind)) seen.add(f.rule);
    }
    for (const [a, b] of [['fixtures/weather', 'fixtures/schema-pairs/weather-v2'], ['fixtures/schema-pairs/weather-v2', 'fixtures/weather'], ['fixtures/weather', 'fixtures/schema-pairs/weather-v3']] as const) {
      for (const f of await diffEnvFolders(a, b)) seen.add(f.rule);
    }
    expect([...seen].filter((id) => !(id in RULES))).toEqual([]);
    expect(seen.size).toBeGreaterThan(40);
  });
});

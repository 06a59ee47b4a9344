/**
 * Incremental validation must agree with full validation, exactly: same verdict, same pointers.
 * Checked on the airline fixture's real state schema (tau2's FlightDB: $refs, anyOf, maps) and on
 * a schema with cross-field keywords, over a few thousand random patches that keep or break it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { applyPatch, Rng, validate, type JsonObject, type JsonSchema, type JsonValue, type Patch } from '../internal.js';
import { StateValidator } from './state-validator.js';

const airlineSchema = JSON.parse(readFileSync('fixtures/airline/state_schema.json', 'utf8')) as JsonSchema;
const airlineState = (JSON.parse(readFileSync('fixtures/airline/initial_states.json', 'utf8')) as JsonValue[])[0] as JsonValue;

/** Every path of a document, with its value. */
function paths(doc: JsonValue, prefix = ''): [string, JsonValue][] {
  const out: [string, JsonValue][] = [[prefix, doc]];
  if (Array.isArray(doc)) doc.forEach((v, i) => out.push(...paths(v, `${prefix}/${i}`)));
  else if (doc !== null && typeof doc === 'object') for (const [k, v] of Object.entries(doc)) out.push(...paths(v, `${prefix}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`));
  return out;
}

const VALUES: JsonValue[] = [null, 0, -1, 2.5, 'economy', 'x', true, [], {}, { status: 'cancelled' }];

function randomPatch(rng: Rng, doc: JsonValue): Patch {
  const all = paths(doc).filter(([p]) => p !== '');
  const [path, value] = all[rng.int(0, all.length - 1)] as [string, JsonValue];
  const pick = rng.int(0, 9);
  if (pick < 5) return [{ op: 'replace', path, value: VALUES[rng.int(0, VALUES.length - 1)] as JsonValue }];
  if (pick < 7) return [{ op: 'remove', path }];
  if (pick < 8 && Array.isArray(value)) return [{ op: 'add', path: `${path}/-`, value: VALUES[rng.int(0, VALUES.length - 1)] as JsonValue }];
  if (pick < 9 && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    // A new map entry: a copy of a sibling (valid) or a random value (mostly invalid).
    const siblings = Object.values(value as JsonObject);
    const entry = rng.int(0, 1) === 0 && siblings.length > 0 ? siblings[0] : VALUES[rng.int(0, VALUES.length - 1)];
    return [{ op: 'add', path: `${path}/NEW${rng.int(0, 99)}`, value: entry as JsonValue }];
  }
  return [{ op: 'replace', path, value }];
}

function agree(schema: JsonSchema, state: JsonValue, runs: number, seed: number): { valid: number; invalid: number } {
  const v = new StateValidator(schema);
  const rng = new Rng(seed);
  const counts = { valid: 0, invalid: 0 };
  for (let i = 0; i < runs; i++) {
    const patch = rng.int(0, 2) === 0 ? [...randomPatch(rng, state), ...randomPatch(rng, state)] : randomPatch(rng, state);
    let next: JsonValue;
    try {
      next = applyPatch(state, patch);
    } catch {
      continue;
    }
    const full = validate(schema, next).map((x) => x.pointer).sort();
    const incremental = v.validateChange(next, patch).map((x) => x.pointer).sort();
    expect(incremental.length > 0, JSON.stringify(patch)).toBe(full.length > 0);
    expect(new Set(incremental), JSON.stringify(patch)).toEqual(new Set(full));
    counts[full.length === 0 ? 'valid' : 'invalid']++;
  }
  return counts;
}

describe('StateValidator', () => {
  it('agrees with full validation on the airline state (tau2 FlightDB schema)', () => {
    expect(validate(airlineSchema, airlineState)).toEqual([]);
    const counts = agree(airlineSchema, airlineState, 1_500, 1);
    // Both outcomes were exercised, many times.
    expect(counts.valid).toBeGreaterThan(150);
    expect(counts.invalid).toBeGreaterThan(150);
  });

  it('agrees on a schema with cross-field keywords, by validating their whole subtree', () => {
    const schema: JsonSchema = {
      type: 'object',
      required: ['a', 'items'],
      properties: {
        a: { type: 'object', properties: { x: { type: 'integer' }, y: { type: 'integer' } }, dependentRequired: { x: ['y'] }, if: { properties: { x: { const: 1 } } }, then: { properties: { y: { minimum: 5 } } } },
        items: { type: 'array', items: { type: 'integer' }, uniqueItems: true, maxItems: 4 },
        m: { type: 'object', additionalProperties: { type: 'string' }, maxProperties: 3, propertyNames: { pattern: '^[a-z]+$' } },
        any: { anyOf: [{ type: 'string' }, { type: 'object', properties: { k: { type: 'integer' } } }] },
      },
      additionalProperties: false,
    };
    const state: JsonValue = { a: { x: 1, y: 6 }, items: [1, 2, 3], m: { p: 'q', r: 's' }, any: { k: 1 } };
    expect(validate(schema, state)).toEqual([]);
    const counts = agree(schema, state, 3_000, 7);
    expect(counts.valid).toBeGreaterThan(100);
    expect(counts.invalid).toBeGreaterThan(100);
  });
});

/**
 * Property test on generated schema pairs: every breaking finding carries a witness that ajv
 * confirms, and when the verdict is "compatible", values sampled from the producer's side all
 * validate on the consumer's side.
 */
import { describe, expect, it } from 'vitest';
import { compileSchema, diffSchema, generate, Rng, type DiffKind } from '../internal.js';

type S = Record<string, unknown>;

function leaf(rng: Rng): S {
  switch (rng.int(0, 4)) {
    case 0:
      return { type: 'integer', minimum: rng.int(-5, 0), maximum: rng.int(1, 20) };
    case 1:
      return { type: 'number', ...(rng.next() < 0.5 ? { multipleOf: rng.pick([0.5, 0.25, 2]) } : {}), maximum: rng.int(10, 100) };
    case 2:
      return { type: 'string', minLength: rng.int(0, 2), maxLength: rng.int(3, 12), ...(rng.next() < 0.3 ? { pattern: '^[a-z]*$' } : {}) };
    case 3:
      return { enum: rng.pick([['a', 'b', 'c'], [1, 2, 3], ['x', 'y']]) };
    default:
      return { type: rng.pick([['string', 'null'], ['integer'], ['boolean', 'null']]) };
  }
}

function schema(rng: Rng, depth = 0): S {
  if (depth > 1 || rng.next() < 0.3) return leaf(rng);
  if (rng.next() < 0.25) return { type: 'array', items: schema(rng, depth + 1), maxItems: rng.int(2, 5) };
  const properties: Record<string, S> = {};
  const n = rng.int(1, 4);
  for (let i = 0; i < n; i++) properties[`p${i}`] = schema(rng, depth + 1);
  const keys = Object.keys(properties);
  return { type: 'object', properties, required: keys.filter(() => rng.next() < 0.5), ...(rng.next() < 0.3 ? { additionalProperties: false } : {}) };
}

/** One random edit somewhere in the schema: tighten or loosen a keyword, add or drop a property or a requirement. */
function mutate(s: S, rng: Rng): S {
  const copy = structuredClone(s);
  const nodes: S[] = [];
  const walk = (n: S): void => {
    nodes.push(n);
    if (n['properties']) for (const v of Object.values(n['properties'] as Record<string, S>)) walk(v);
    if (n['items']) walk(n['items'] as S);
  };
  walk(copy);
  const node = rng.pick(nodes);
  const edits: (() => void)[] = [
    () => (node['maximum'] = typeof node['maximum'] === 'number' ? node['maximum'] + rng.int(-6, 6) : rng.int(0, 50)),
    () => (node['minimum'] = typeof node['minimum'] === 'number' ? node['minimum'] + rng.int(-3, 3) : rng.int(-3, 3)),
    () => (node['maxLength'] = rng.int(1, 8)),
    () => delete node['maxLength'],
    () => (Array.isArray(node['enum']) ? (node['enum'] = (node['enum'] as unknown[]).slice(rng.int(0, 1))) : (node['enum'] = ['a', 1])),
    () => (node['type'] = rng.pick([['string'], ['string', 'null'], ['integer'], ['number'], ['object'], ['array']])),
    () => (node['additionalProperties'] = node['additionalProperties'] === false ? true : false),
    () => (node['required'] = node['properties'] ? Object.keys(node['properties'] as object).filter(() => rng.next() < 0.5) : []),
    () => (node['multipleOf'] = rng.pick([0.5, 1, 3])),
    () => delete node['multipleOf'],
    () => (node['pattern'] = rng.pick(['^[a-z]*$', '[0-9]', '^.{0,4}$'])),
    () => {
      if (node['properties']) (node['properties'] as Record<string, S>)[`q${rng.int(0, 9)}`] = leaf(rng);
    },
    () => {
      if (!node['properties']) return;
      const drop = rng.pick(Object.keys(node['properties'] as object).concat('none'));
      node['properties'] = Object.fromEntries(Object.entries(node['properties'] as Record<string, S>).filter(([k]) => k !== drop));
    },
  ];
  rng.pick(edits)();
  return copy;
}

describe('schema-diff property test', () => {
  it('breaking ⇒ ajv-confirmed witness; compatible ⇒ producer samples pass the consumer', () => {
    const rng = new Rng(20261129);
    let breaking = 0;
    let compatible = 0;
    for (let i = 0; i < 300; i++) {
      const oldS = schema(rng);
      const newS = mutate(oldS, rng);
      const kind: DiffKind = rng.pick(['action', 'state', 'reward']);
      const findings = diffSchema(oldS, newS, kind, { seed: i });
      const [producer, consumer] = kind === 'action' ? [oldS, newS] : [newS, oldS];
      const broke = findings.filter((f) => f.severity === 'breaking');
      for (const f of broke) {
        const [valid, invalid] = f.witness_valid_in === 'old' ? [oldS, newS] : [newS, oldS];
        const where = `pair ${i} (${kind}) ${f.rule}: ${JSON.stringify(oldS)} → ${JSON.stringify(newS)}`;
        expect(compileSchema(valid)(f.witness), where).toBe(true);
        expect(compileSchema(invalid)(f.witness), where).toBe(false);
      }
      if (broke.length > 0) breaking++;
      if (findings.every((f) => f.severity === 'info')) {
        compatible++;
        const validConsumer = compileSchema(consumer);
        const sampler = new Rng(i * 7919);
        for (let k = 0; k < 30; k++) {
          const v = generate(producer, sampler).value;
          if (v === undefined) continue;
          expect(validConsumer(v), `pair ${i} (${kind}) judged compatible, but ${JSON.stringify(v)} breaks: ${JSON.stringify(oldS)} → ${JSON.stringify(newS)}`).toBe(true);
        }
      }
    }
    // The generator must exercise both verdicts.
    expect(breaking).toBeGreaterThan(20);
    expect(compatible).toBeGreaterThan(20);
  });
});

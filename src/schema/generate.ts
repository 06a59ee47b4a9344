/**
 * Seeded value generation from a JSON Schema, for the random policy and for initial states.
 * json-schema-faker does the generating; every value is then checked with ajv, because the
 * faker returns invalid values for some schemas. A value that fails is never returned.
 */
import { generateSync } from 'json-schema-faker';
import { compileSchema, type JsonSchema } from './ajv.js';
import type { JsonValue } from '../shared/json.js';
import type { Rng } from '../shared/rng.js';

export interface GenerateResult {
  readonly value?: JsonValue;
  /** Attempts whose output the schema rejected (generator misses). */
  readonly misses: number;
}

/** Up to `tries` seeded attempts; returns the first value the schema accepts. */
export function generateValid(schema: JsonSchema, rng: Rng, tries = 8): GenerateResult {
  const validator = compileSchema(schema);
  let misses = 0;
  for (let i = 0; i < tries; i++) {
    let value: unknown;
    try {
      value = generateSync(schema as Parameters<typeof generateSync>[0], { seed: rng.int(1, 2 ** 31 - 1), optionalsProbability: 0.5, maxDefaultItems: 3 });
    } catch {
      misses++;
      continue;
    }
    if (validator(value)) return { value: value as JsonValue, misses };
    misses++;
  }
  return { misses };
}

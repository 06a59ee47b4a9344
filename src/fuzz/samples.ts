/** `agent fuzz --schema FILE --generate N [--invalid]`: N values, all valid or all invalid, from a seed. */
import { findUnsatisfiable } from '../schema/satisfiable.js';
import type { JsonSchema } from '../schema/ajv.js';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { generate } from '../generate/generate.js';
import { mutants } from './mutate.js';

/** A generated value: whether it should be valid, and for an invalid one the mutation and the pointer where it applies. */
export interface Sample {
  readonly valid: boolean;
  readonly value: JsonValue;
  /** For invalid samples: the mutation and the JSON pointer it breaks. */
  readonly mutation?: string;
  readonly pointer?: string;
}

/** Draws `count` values from a schema (valid, or with `invalid` ones breaking it), and says how many draws missed. */
export function generateSamples(schema: JsonSchema, count: number, options: { invalid?: boolean; seed?: number } = {}): { samples: Sample[]; misses: number } {
  const unsat = findUnsatisfiable(schema);
  if (unsat) throw new AgentError('ACTION_UNSATISFIABLE', `the schema admits no value: ${unsat.reason} (at ${unsat.pointer || '/'})`, { hint: 'Fix the schema at that pointer.' });
  const samples: Sample[] = [];
  let misses = 0;
  for (let i = 0; samples.length < count && i < count * 4; i++) {
    const rng = new Rng(hashSeed(options.seed ?? 0, 'sample', i));
    const g = generate(schema, rng);
    misses += g.misses;
    if (!options.invalid) {
      if (g.value !== undefined) samples.push({ valid: true, value: g.value });
      continue;
    }
    // Invalid values need no valid one to start from: without one, the probes start from null (each is checked invalid).
    const m = mutants(schema, g.value ?? null, rng, 6);
    const pick = m.length > 0 ? rng.pick(m) : undefined;
    if (pick) samples.push({ valid: false, value: pick.value, mutation: pick.mutation, pointer: pick.pointer });
  }
  return { samples, misses };
}

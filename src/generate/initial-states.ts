/** Where an env's episodes start: its declared initial states, or one generated from its state schema. */
import type { EnvDefinition } from '../schema/definition.js';
import { UsageError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { generate } from './generate.js';

/** The env's initial states, or one generated from its state schema (seeded) when it declares none. */
export function initialStatesOf(definition: EnvDefinition, seed: number): readonly JsonValue[] {
  if (definition.initialStates.length > 0) return definition.initialStates;
  const generated = generate(definition.stateSchema, new Rng(hashSeed(seed, 'initial-state')));
  if (generated.value === undefined) throw new UsageError(`env '${definition.name}' declares no initial states and none could be generated from its state schema`, 'Add initial_states.json (an array of states) to the env folder.');
  return [generated.value];
}

/**
 * `agentic-rl-toolkit/fuzz`: what `agent fuzz` does, as a library: cases generated from an env's
 * schemas (valid, boundary and mutated), run against its tools, failures grouped with a replay.
 *
 * @module agentic-rl-toolkit/fuzz
 */
export { Fuzzer, type FailureGroup, type FuzzEvent, type FuzzOptions, type FuzzSummary } from './fuzz/fuzz.js';
export { CHECK_DESCRIPTIONS, CHECKS, type CheckName, type Failure, type FuzzCase } from './fuzz/case.js';
export { generate, type GenerateOptions, type Generated } from './generate/generate.js';
export { boundaries, mutants, type Variant } from './fuzz/mutate.js';
export { generateSamples, type Sample } from './fuzz/samples.js';

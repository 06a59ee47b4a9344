/**
 * `agentic-rl-toolkit/schema`: the schema tools under env definitions: JSON Schema compiled and
 * checked the way envs are, `enabled_if` conditions, action documents in other dialects (BFCL),
 * and the search for actions no state can enable.
 *
 * @module agentic-rl-toolkit/schema
 */
export { parseActionDocument, type ParsedAction, type ParseResult } from './schema/actions.js';
export type { RewardBinding, RewardFallback, RewardScope, ToolBinding } from './schema/definition.js';
export { compileCondition, ConditionSyntaxError, type CompiledCondition } from './schema/enabled-if.js';
export { checkSchema, compileSchema, validate, type JsonSchema } from './schema/ajv.js';
export { findUnsatisfiable, type Unsatisfiable } from './schema/satisfiable.js';
export { convertBfclSchema, type SchemaDialect } from './schema/dialects.js';

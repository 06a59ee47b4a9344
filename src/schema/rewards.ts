/** Reads reward_schema.json: each property is one reward source with its range and delivery contract. */
import { checkSchema, validate, type JsonSchema } from './ajv.js';
import type { RewardAggregation, RewardSourceDefinition } from './definition.js';
import { metaSchema } from './meta-schemas.js';
import { defaultBinding } from './reward-bindings.js';
import type { Issue } from '../shared/errors.js';
import { escapePointerToken } from '../shared/json.js';

/** Delivery-contract keywords: they describe the source, not the value, so they are removed from its value schema. */
const CONTRACT_KEYS = new Set(['delay_ms', 'deadline_ms', 'aggregation', 'weight', 'fallback']);

export function parseRewardDocument(doc: unknown, file: string, base = ''): { sources: RewardSourceDefinition[]; issues: Issue[] } {
  const shape = validate(metaSchema('reward-schema'), doc, file).map((i) => ({ ...i, pointer: base + i.pointer }));
  if (shape.length > 0) return { sources: [], issues: shape };
  const issues: Issue[] = [];
  const sources: RewardSourceDefinition[] = [];
  for (const [name, spec] of Object.entries((doc as { properties: Record<string, Record<string, unknown>> }).properties)) {
    const pointer = `${base}/properties/${escapePointerToken(name)}`;
    const schema: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(spec)) if (!CONTRACT_KEYS.has(k)) schema[k] = v;
    if (schema['type'] === undefined) schema['type'] = 'number';
    const schemaIssues = checkSchema(schema, file, pointer);
    if (schemaIssues.length > 0) {
      issues.push(...schemaIssues);
      continue;
    }
    const fallback = spec['fallback'] as RewardSourceDefinition['fallback'];
    const deadline = spec['deadline_ms'] as number | undefined;
    const delay = (spec['delay_ms'] as number | undefined) ?? 0;
    if (deadline !== undefined && deadline < delay) {
      issues.push({ file, pointer: `${pointer}/deadline_ms`, message: `deadline_ms (${deadline}) is shorter than delay_ms (${delay}): the source would always be late` });
      continue;
    }
    sources.push({
      name,
      ...(typeof spec['description'] === 'string' ? { description: spec['description'] } : {}),
      schema: schema as JsonSchema,
      delayMs: delay,
      ...(deadline !== undefined ? { deadlineMs: deadline } : {}),
      aggregation: (spec['aggregation'] as RewardAggregation | undefined) ?? 'sum',
      weight: (spec['weight'] as number | undefined) ?? 1,
      ...(fallback ? { fallback } : {}),
      binding: defaultBinding({ delayMs: delay }),
    });
  }
  return { sources, issues };
}

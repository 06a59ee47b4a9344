/**
 * Turns a tool's immediate rewards into a step's reward record. Declared sources with a delay
 * (an LLM judge, a human review) are `pending` on every step until they arrive; immediate
 * sources appear when the tool reports them. A reward the schema does not declare, or a value
 * outside its source's schema, is a contract violation of the tool.
 */
import { validate } from '../schema/ajv.js';
import type { RewardSourceDefinition } from '../schema/definition.js';
import { formatIssues, ToolError } from '../shared/errors.js';
import type { RewardEntry } from '../env/events.js';

export interface StepRewards {
  readonly entries: Readonly<Record<string, RewardEntry>>;
  /** Σ weight × value over arrived rewards (booleans count 1/0). */
  readonly total: number;
  readonly arrived: readonly { readonly source: string; readonly value: number }[];
}

export function stepRewards(sources: ReadonlyMap<string, RewardSourceDefinition>, reported: Readonly<Record<string, number | boolean>> | undefined, tool: string): StepRewards {
  const entries: Record<string, RewardEntry> = {};
  const arrived: { source: string; value: number }[] = [];
  let total = 0;
  if (reported) {
    for (const [name, raw] of Object.entries(reported)) {
      const source = sources.get(name);
      if (!source) {
        throw new ToolError('TOOL_CONTRACT', tool, `reported reward '${name}', which reward_schema.json does not declare`, {
          hint: `Declare '${name}' in reward_schema.json, or stop reporting it. Declared: ${[...sources.keys()].join(', ') || 'none'}.`,
        });
      }
      const issues = validate(source.schema, raw);
      if (issues.length > 0) {
        throw new ToolError('TOOL_CONTRACT', tool, `reward '${name}' = ${JSON.stringify(raw)} violates its schema:\n${formatIssues(issues)}`);
      }
      const value = typeof raw === 'boolean' ? Number(raw) : raw;
      entries[name] = { value, status: 'arrived', delayMs: source.delayMs };
      arrived.push({ source: name, value });
      total += source.weight * value;
    }
  }
  for (const source of sources.values()) {
    if (source.delayMs > 0 && !(source.name in entries)) entries[source.name] = { value: null, status: 'pending', delayMs: source.delayMs };
  }
  return { entries, total, arrived };
}

/** The reward record of a step that produced nothing (failed, or still running). */
export function pendingRewards(sources: ReadonlyMap<string, RewardSourceDefinition>): Readonly<Record<string, RewardEntry>> {
  const entries: Record<string, RewardEntry> = {};
  for (const s of sources.values()) if (s.delayMs > 0) entries[s.name] = { value: null, status: 'pending', delayMs: s.delayMs };
  return entries;
}

/**
 * Turns a tool's own rewards into the step's first reward entries. A reward the schema does not
 * declare, one bound elsewhere (a judge, a module, external), or a value outside its source's
 * schema is a contract violation of the tool. Delayed sources are the ledger's (ledger.ts).
 */
import { validate } from '../schema/ajv.js';
import type { RewardSourceDefinition } from '../schema/definition.js';
import { formatIssues, ToolError } from '../shared/errors.js';
import type { RewardEntry } from '../events/env-events.js';
import { cleanSum } from '../shared/float-sum.js';

export interface StepRewards {
  readonly entries: Readonly<Record<string, RewardEntry>>;
  /** Σ weight × value over arrived rewards (booleans count 1/0). */
  readonly total: number;
}

/** A step whose tool reported no reward: shared, it is never written to. */
const NONE: StepRewards = Object.freeze({ entries: Object.freeze({}), total: 0 });

export function stepRewards(sources: ReadonlyMap<string, RewardSourceDefinition>, reported: Readonly<Record<string, number | boolean>> | undefined, tool: string, time: number): StepRewards {
  if (!reported) return NONE;
  const entries: Record<string, RewardEntry> = {};
  let total = 0;
  // `reported` is a tool result's frozen plain copy (tools/result.ts): its keys are all its own.
  for (const name in reported) {
    const raw = reported[name] as number | boolean;
    const source = sources.get(name);
    if (!source) {
      throw new ToolError('TOOL_CONTRACT', tool, `reported reward '${name}', which reward_schema.json does not declare`, {
        hint: `Declare '${name}' in reward_schema.json, or stop reporting it. Declared: ${[...sources.keys()].join(', ') || 'none'}.`,
      });
    }
    if (source.binding.kind !== 'tool') {
      throw new ToolError('TOOL_CONTRACT', tool, `reported reward '${name}', which comes from ${source.binding.kind === 'external' ? 'outside (external)' : `its ${source.binding.kind}`}, not from the tool`, {
        hint: `Stop reporting '${name}' from the tool, or bind it to the tool in env.json reward_sources (with delay_ms 0).`,
      });
    }
    const issues = validate(source.schema, raw);
    if (issues.length > 0) {
      throw new ToolError('TOOL_CONTRACT', tool, `reward '${name}' = ${JSON.stringify(raw)} violates its schema:\n${formatIssues(issues)}`);
    }
    const value = typeof raw === 'boolean' ? Number(raw) : raw;
    entries[name] = { status: 'arrived', value, arrived_at: time, delay_ms: 0 };
    total += source.weight * value;
  }
  return { entries, total: cleanSum(total) };
}

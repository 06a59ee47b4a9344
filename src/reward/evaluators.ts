/**
 * The sources that compute a value from a step: a module function (a reward model, a rule
 * checker) or an LLM judge. Both see the same input, built here once.
 */
import type { RewardSourceDefinition } from '../schema/definition.js';
import { AgentError, describeError } from '../shared/errors.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { CallCost } from '../events/env-events.js';
import type { LlmCallReport } from '../llm/client.js';
import { importToolModule } from '../tools/module-loader.js';
import type { StepRef } from './ledger.js';
import { LlmJudge, type JudgeStats } from './llm-judge.js';
import { askService } from './service-evaluator.js';

/** What a step-scoped source sees of a step. */
/** A step taken before a crash, as an episode-scoped source sees it in the trajectory. */
export interface RestoredStep {
  readonly action: string;
  readonly params: JsonObject;
  readonly observation?: JsonValue;
}

/** A settled step as a reward source sees it: the action and params, the observation, the state before and after, the immediate reward, and the step's place. */
export interface SettledStep extends StepRef {
  readonly params: JsonObject;
  readonly observation?: JsonValue;
  readonly stateBefore: JsonValue;
  readonly stateAfter: JsonValue;
  /** Σ weight × value of the tool's own rewards. */
  readonly immediate: number;
}

export type StepJudgement =
  | { readonly kind: 'step'; readonly step: SettledStep }
  | {
      readonly kind: 'episode';
      /** The episode's last step, where the value lands. */
      readonly step: StepRef;
      readonly initial: JsonValue;
      readonly final: JsonValue;
      readonly trajectory: readonly { readonly action: string; readonly params: JsonObject; readonly observation?: JsonValue }[];
    };

/**
 * The argument of a module source's function. For an episode-scoped source, `state_before` is the
 * initial state, `state_after` the final one, and `trajectory` lists the steps.
 */
export interface RewardInput {
  readonly state_before: JsonValue;
  readonly state_after: JsonValue;
  readonly action: string;
  readonly params: JsonObject;
  readonly observation: JsonValue;
  readonly episode: number;
  readonly step: number;
  readonly trace_id: string;
  readonly trajectory?: readonly { readonly action: string; readonly params: JsonObject; readonly observation?: JsonValue }[];
  readonly signal: AbortSignal;
}

/** A module source's function. */
export type RewardFunction = (input: RewardInput) => number | boolean | Promise<number | boolean>;

export type EvaluatorStats = { calls: number; failed: number } | JudgeStats;

export interface SourceEvaluator {
  /** `report`: each model call a judge makes for it (llm_call events). */
  evaluate(judgement: StepJudgement, signal: AbortSignal, report?: (call: LlmCallReport) => void): Promise<{ readonly value: number | boolean; readonly cost?: CallCost }>;
  stats(): EvaluatorStats;
  close(): Promise<void>;
}

export function inputOf(j: StepJudgement, signal: AbortSignal): RewardInput {
  if (j.kind === 'step') {
    const s = j.step;
    return { state_before: s.stateBefore, state_after: s.stateAfter, action: s.action, params: s.params, observation: s.observation ?? null, episode: s.episode, step: s.step, trace_id: s.traceId, signal };
  }
  const last = j.trajectory[j.trajectory.length - 1];
  return { state_before: j.initial, state_after: j.final, action: j.step.action, params: last?.params ?? {}, observation: last?.observation ?? null, episode: j.step.episode, step: j.step.step, trace_id: j.step.traceId, trajectory: j.trajectory, signal };
}

export function sourceEvaluator(def: RewardSourceDefinition): SourceEvaluator {
  const b = def.binding;
  if (b.kind === 'judge') {
    const judge = new LlmJudge(def.name, b.judge, def.schema);
    return {
      evaluate: (j, signal, report) => {
        const { signal: _s, ...vars } = inputOf(j, signal);
        return judge.judge({ ...vars, state: vars.state_after, trajectory: vars.trajectory ? ([...vars.trajectory] as JsonValue) : undefined }, signal, report);
      },
      stats: () => ({ ...judge.stats }),
      close: async () => {},
    };
  }
  const counts = { calls: 0, failed: 0 };
  if (b.kind === 'service') {
    return {
      async evaluate(j, signal) {
        counts.calls++;
        const { signal: _s, ...input } = inputOf(j, signal);
        try {
          return { value: await askService(b.url, b.tokenEnv, def.name, { source: def.name, ...input }, signal) };
        } catch (err) {
          counts.failed++;
          throw err;
        }
      },
      stats: () => ({ ...counts }),
      close: async () => {},
    };
  }
  if (b.kind !== 'module') throw new AgentError('INTERNAL', `reward source '${def.name}' computes nothing (${b.kind})`);
  let fn: Promise<RewardFunction> | undefined;
  return {
    async evaluate(j, signal) {
      fn ??= importToolModule(b.module).then((ns) => {
        const f = ns[b.exportName];
        if (typeof f !== 'function') {
          throw new AgentError('DEFINITION_INVALID', `reward module '${b.module}' has no function '${b.exportName}'`, { hint: `Export an async function named '${b.exportName}', or name another with "export".` });
        }
        return f as RewardFunction;
      });
      counts.calls++;
      try {
        const value = await (await fn)(inputOf(j, signal));
        if (typeof value !== 'number' && typeof value !== 'boolean') {
          throw new AgentError('TOOL_CONTRACT', `reward function '${b.exportName}' returned ${describeError(value)}, not a number`, { hint: 'Return a number (or a boolean) within the source\'s range.' });
        }
        return { value };
      } catch (err) {
        counts.failed++;
        throw err;
      }
    },
    stats: () => ({ ...counts }),
    close: async () => {},
  };
}

/**
 * Policies choose the next action from an observation. `random` picks uniformly among the
 * enabled actions with seeded, schema-valid parameters. A policy module exports a function
 * (default export or `policy`) with the {@link Policy} signature.
 */
import type { LlmCallReport } from '../llm/client.js';
import type { ChatTurn } from '../llm/chat-turns.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Action, AvailableAction } from '../env/agent-instance.js';
import { generate } from '../generate/generate.js';
import { AgentError, describeError } from '../shared/errors.js';
import { importModule, ModuleImportError } from '../shared/import-module.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { Rng } from '../shared/rng.js';
import type { ErrorInfo } from '../events/env-events.js';

/** What a policy sees each step: the state, the enabled actions, the episode and step, and the last observation or error. */
export interface Observation {
  readonly state: JsonValue;
  readonly actions: readonly AvailableAction[];
  /** In an env with two sides (τ²-bench telecom): the user's actions now, chosen as `{name, params, actor: 'user'}`. */
  readonly user_actions?: readonly AvailableAction[];
  /** The last step's observation, if any. */
  readonly lastObservation?: JsonValue;
  /** Why the last step failed, when it did (it then has no observation). */
  readonly lastError?: ErrorInfo;
  readonly episode: number;
  readonly step: number;
  /** Under `agent benchmark`: the episode's task (its instruction is what the user wants). */
  readonly task?: PolicyTask;
}

/** A benchmark task as a policy sees it. */
export interface PolicyTask {
  readonly id: string;
  readonly instruction: string;
  readonly user_id?: string;
  /** The conversation before the episode starts (OpenAI's chat shape): an `llm:` agent goes on from it. */
  readonly history?: readonly ChatTurn[];
}

/** The policy, with each episode's task in its observations (`obs.task`): how a benchmark and a rollout give it. */
export function withTask(policy: Policy, taskOf: (episode: number) => PolicyTask): Policy {
  return (obs, ctx) => policy({ ...obs, task: taskOf(obs.episode) }, ctx);
}

/** What a policy gets beside the observation: a seeded random generator, an abort signal, and a way to report model calls. */
export interface PolicyContext {
  /** Seeded per (episode, step). */
  readonly rng: Rng;
  readonly signal: AbortSignal;
  /**
   * Report a model call made while choosing (an LLM policy's, its simulated user's): the run
   * records it as an `llm_call` event, a `chat <model>` span when traced, and token metrics.
   */
  readonly reportLlmCall?: (role: 'policy' | 'user', call: LlmCallReport) => void;
}

/** Return an action, or `null` to stop the episode. */
export type Policy = (observation: Observation, ctx: PolicyContext) => Action | null | Promise<Action | null>;

/** The default policy: an enabled action chosen at random, with parameters drawn from its schema. */
export const randomPolicy: Policy = (obs, { rng }) => {
  const candidates = [...obs.actions];
  while (candidates.length > 0) {
    const pick = candidates.splice(rng.int(0, candidates.length - 1), 1)[0] as AvailableAction;
    const { value } = generate(pick.parameters, rng);
    if (value !== undefined) return { name: pick.name, params: value as JsonObject };
  }
  return null;
};

/** `random`, or the path of a module exporting a policy (TypeScript or JavaScript). */
export async function loadPolicy(spec: string): Promise<Policy> {
  if (spec === 'random') return randomPolicy;
  if (!existsSync(spec)) {
    throw new AgentError('BAD_USAGE', `cannot load policy module '${spec}': no such file (looked at ${path.resolve(spec)})`, {
      hint: "Pass --policy random, or the path of a module whose default export is (observation, ctx) => action | null.",
    });
  }
  let ns: Record<string, unknown>;
  try {
    ns = await importModule(spec);
  } catch (err) {
    throw new AgentError('BAD_USAGE', `cannot load policy module ${err instanceof ModuleImportError ? err.message : `'${spec}': ${describeError(err)}`}`, {
      cause: err,
      hint: "Pass --policy random, or the path of a module whose default export is (observation, ctx) => action | null.",
    });
  }
  const fn = ns['default'] ?? ns['policy'];
  if (typeof fn !== 'function') {
    throw new AgentError('BAD_USAGE', `policy module '${spec}' exports no function`, { hint: 'Export the policy as the default export or as `policy`.' });
  }
  return fn as Policy;
}

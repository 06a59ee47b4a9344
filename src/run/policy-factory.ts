/**
 * A run's policy, made in one place whatever asks for it (`agent run`, `agent benchmark`, a
 * trainer's rollouts): a function as it is, a module by its path, `random`, or an `llm:<model>`
 * agent checked before any episode. What it is comes with what run.json records of it and what it
 * keeps of each episode (an LLM agent's conversation, its token sequence), let go as the episode ends.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { LlmRunConfig } from '../events/run-events.js';
import type { EnvDefinition } from '../schema/definition.js';
import { createLlmAgent, llmModel, type LlmAgent, type LlmPolicySettings } from './llm-agent.js';
import { loadPolicy, type Policy } from './policy.js';

/** A policy ready to run: what chooses the actions, what run.json records of it, and what it keeps per episode. */
export interface RunPolicy {
  readonly policy: Policy;
  /** run.json's `config.policy`, and `config.llm` for an `llm:` agent. */
  readonly record: { readonly name: string; readonly llm?: LlmRunConfig };
  /** The agent behind an `llm:` policy (its conversations, usage, invalid calls). */
  readonly agent?: LlmAgent;
  /** The episode is over: what the policy kept of it goes. */
  ended(episode: number): void;
}

/** What an `llm:` agent is told and how it is served: ignored by every other policy. */
export interface PolicySetup {
  /** Its system prompt (read only when the policy is an `llm:` one: an env's policy.md, a suite's rules). */
  readonly system: () => Promise<string>;
  /** What the user asks when an observation carries no task. */
  readonly instruction?: string;
  readonly seed: number;
  /** Where the model is served and how it is sampled (token mode with `tokens`), and the simulated user. */
  readonly llm?: LlmPolicySettings;
  /** Token mode: this policy's actions rendered as the model's turns instead of generated ones (gold data). */
  readonly gold?: Policy;
  readonly signal?: AbortSignal;
}

/** An env's defaults for an `llm:` agent under `agent run`: its policy.md as the system prompt, its description as what the user asks (unless `llm` says otherwise). */
export function envPolicySetup(env: Pick<EnvDefinition, 'dir' | 'description'>, llm: (LlmPolicySettings & { readonly system?: string; readonly instruction?: string }) | undefined, seed: number, signal: AbortSignal | undefined): PolicySetup {
  const instruction = llm?.instruction ?? env.description;
  return {
    system: async () => llm?.system ?? (await readFile(path.join(env.dir, 'policy.md'), 'utf8').then((t) => t.trim(), () => '')),
    ...(instruction !== undefined ? { instruction } : {}),
    seed,
    ...(llm ? { llm } : {}),
    ...(signal ? { signal } : {}),
  };
}

/** The policy `spec` names: a function, `random`, a module path, or `llm:<model>` (an agent, its server checked before any episode). */
export async function makePolicy(spec: string | Policy, context: PolicySetup): Promise<RunPolicy> {
  if (typeof spec === 'function') return namedPolicy(spec, spec.name || 'custom');
  const model = llmModel(spec);
  if (model === undefined) return namedPolicy(await loadPolicy(spec), spec);
  return llmPolicy(model, spec, context);
}

/** An `llm:` agent for `model` (recorded as `name`: `llm:<model>`, or `gold` when it renders gold turns). */
export async function llmPolicy(model: string, name: string, context: PolicySetup): Promise<RunPolicy> {
  const { agent, config } = await createLlmAgent(model, context.llm ?? {}, {
    system: await context.system(),
    seed: context.seed,
    ...(context.instruction !== undefined ? { instruction: context.instruction } : {}),
    ...(context.signal ? { signal: context.signal } : {}),
    ...(context.gold ? { gold: context.gold } : {}),
  });
  return { policy: agent.policy, record: { name, llm: config }, agent, ended: (episode) => agent.ended(episode) };
}

/** A policy function as a run's policy, recorded as `name`; it keeps nothing per episode. */
export function namedPolicy(policy: Policy, name: string): RunPolicy {
  return { policy, record: { name }, ended: () => undefined };
}

/**
 * A run's policy, made in one place whatever asks for it (`agent run`, `agent benchmark`, a
 * trainer's rollouts): a function as it is, a module by its path, `random`, an `llm:<model>`
 * agent checked before any episode, or an agent program (`cmd:`) that drives each episode itself
 * through the capture endpoint (src/capture/). What it is comes with what run.json records of it and what it
 * keeps of each episode (an LLM agent's conversation, its token sequence), let go as the episode ends.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { LlmRunConfig } from '../events/run-events.js';
import type { EnvDefinition } from '../schema/definition.js';
import { createLlmAgent, llmModel, llmServing, type LlmAgent, type LlmPolicySettings } from './llm-agent.js';
import { loadPolicy, type Policy, type PolicyTask } from './policy.js';
import type { EpisodeDriver } from './episode-runner.js';
import { servedModel } from '../llm/vllm.js';
import { AgentError } from '../shared/errors.js';
import { CaptureServer } from '../capture/capture-server.js';
import type { CaptureUpstream } from '../capture/chat-capture.js';
import { ProgramEpisode, type ProgramLimits } from './program-episode.js';

/** A policy ready to run: what chooses the actions, what run.json records of it, and what it keeps per episode. */
export interface RunPolicy {
  readonly policy: Policy;
  /** run.json's `config.policy`, and `config.llm` for an `llm:` agent. */
  readonly record: { readonly name: string; readonly llm?: LlmRunConfig };
  /** The agent behind an `llm:` policy (its conversations, usage, invalid calls). */
  readonly agent?: LlmAgent;
  /** The episode is over: what the policy kept of it goes. */
  ended(episode: number): void;
  /** A policy that drives each episode itself (an agent program, `cmd:`): episode i's driver, told its task when a benchmark has one. */
  readonly driver?: (episode: number, task?: PolicyTask) => EpisodeDriver;
  /** Releases what the policy holds for the whole run (a capture endpoint). */
  readonly dispose?: () => Promise<void>;
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
  /** The env's name (what an agent program's MCP server calls itself). */
  readonly envName?: string;
  /** An agent program's limits per episode (`cmd:`). */
  readonly program?: ProgramLimits;
  /** An `llm:` agent keeps every episode's conversation after it ends (a benchmark writes them all); otherwise each goes with its episode. */
  readonly keepConversations?: boolean;
  readonly signal?: AbortSignal;
}

/** An env's defaults for an `llm:` agent under `agent run`: its policy.md as the system prompt, its description as what the user asks (unless `llm` says otherwise). */
export function envPolicySetup(env: Pick<EnvDefinition, 'dir' | 'description' | 'name'>, llm: (LlmPolicySettings & { readonly system?: string; readonly instruction?: string }) | undefined, seed: number, signal: AbortSignal | undefined, program?: ProgramLimits): PolicySetup {
  const instruction = llm?.instruction ?? env.description;
  return {
    system: async () => llm?.system ?? (await readFile(path.join(env.dir, 'policy.md'), 'utf8').then((t) => t.trim(), () => '')),
    ...(instruction !== undefined ? { instruction } : {}),
    seed,
    envName: env.name,
    ...(program ? { program } : {}),
    ...(llm ? { llm } : {}),
    ...(signal ? { signal } : {}),
  };
}

/** The policy `spec` names: a function, `random`, a module path, `llm:<model>` (an agent, its server checked before any episode), or `cmd:<command line>` (an agent program, started per episode). */
export async function makePolicy(spec: string | Policy, context: PolicySetup): Promise<RunPolicy> {
  if (typeof spec === 'function') return namedPolicy(spec, spec.name || 'custom');
  const command = programCommand(spec);
  if (command !== undefined) return programPolicy(command, context);
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
    ...(context.keepConversations ? { keepConversations: true } : {}),
  });
  return { policy: agent.policy, record: { name, llm: config }, agent, ended: (episode) => agent.ended(episode) };
}

/** A policy function as a run's policy, recorded as `name`; it keeps nothing per episode. */
export function namedPolicy(policy: Policy, name: string): RunPolicy {
  return { policy, record: { name }, ended: () => undefined };
}

const PREFIX = 'cmd:';

/** `cmd:<command line>` → the command line; undefined for any other policy name. */
export function programCommand(spec: string): string | undefined {
  return spec.startsWith(PREFIX) ? spec.slice(PREFIX.length).trim() : undefined;
}

/**
 * `cmd:<command line>`: an agent program as the run's policy. Each episode is driven by one start of
 * the program (program-episode.ts) through one capture endpoint for the run, its model calls
 * completed against the inference server the run names (`--llm-base-url`; in token mode with
 * `--tokens`, as the `llm:` policy's turns are), checked before any episode.
 */
export async function programPolicy(command: string, context: PolicySetup): Promise<RunPolicy> {
  if (command === '') throw new AgentError('BAD_USAGE', "--policy cmd: names no command", { hint: "Pass the program's command line: --policy cmd:'python3 agent.py'." });
  const settings = context.llm ?? {};
  if (settings.baseURL === undefined) {
    throw new AgentError('BAD_USAGE', "an agent program's model calls go to an inference server: --policy cmd: needs --llm-base-url", { hint: 'Pass --llm-base-url http://<host>:8000/v1 of a vLLM-compatible server (add --tokens to record token-exact turns for training).' });
  }
  const model = await servedModel(settings.baseURL, context.signal);
  const { tokens, config } = await llmServing(model, { ...settings, provider: 'openai' }, context.seed, context.signal);
  const apiKey = settings.apiKeyEnv !== undefined ? process.env[settings.apiKeyEnv] : undefined;
  const upstream: CaptureUpstream = tokens ? { kind: 'tokens', chat: tokens } : { kind: 'text', baseURL: settings.baseURL, apiKey, model };
  const server = await CaptureServer.start();
  return {
    // Never asked: each episode is driven by its program.
    policy: () => null,
    record: { name: `${PREFIX}${command}`, llm: config },
    ended: () => undefined,
    driver: (_episode, task) => new ProgramEpisode({ command, server, upstream, envName: context.envName ?? 'env', ...(context.instruction !== undefined ? { instruction: context.instruction } : {}), ...context.program }, task),
    dispose: () => server[Symbol.asyncDispose](),
  };
}

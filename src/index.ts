/**
 * `agentic-rl-toolkit`: the core a user writes against. Define and load an env (schemas, tools,
 * rewards), drive its instances through the async core (dispatch many calls, resolve them as they
 * settle), run episodes with a policy into a run folder, keep states in a store, and handle the
 * toolkit's typed errors. Importing it loads no ink, React or CLI code.
 *
 * Each product has its own entry: `/schema`, `/schema-diff`, `/fuzz`, `/benchmark`, `/serve`,
 * `/replay` (run folders, exports), `/observe`, `/store/redis`, `/distributed`, `/testing`, `/ui`.
 *
 * @module agentic-rl-toolkit
 */

// Envs: definitions, instances, the async core.
export { AgentEnv, type EnvOptions } from './env/agent-env.js';
export { AgentInstance, type Action, type Actor, type AvailableAction, type PendingTrace, type ResolveOptions, type StepInfo, type StepResult } from './env/agent-instance.js';
export { defineEnv, loadEnvDefinition } from './env/load-env.js';
export type { EnvManifest, LoadEnvOptions } from './schema/load-env.js';
export type { ActionDefinition, EnvDefinition, RewardSourceDefinition, SandboxSpec, ToolPolicy } from './schema/definition.js';

// Tools.
export { defineTool } from './tools/define-tool.js';
export { EXIT_RETRYABLE } from './tools/executors.js';
export type { EpisodeSandbox, SandboxRunOptions, ToolContext, ToolFactory, ToolHandler, ToolModuleConfig, ToolResult } from './tools/types.js';
export type { SandboxLimits, SandboxMechanism, SandboxMode, SandboxResult } from './sandbox/sandbox.js';
export type { AllowedHost } from './sandbox/egress.js';

// What an env reports.
export type { EnvEvent, EnvEventOf, EnvEventType, ErrorInfo, RewardEntry, RewardStatus, TokenTurn, TraceStatus } from './events/env-events.js';

// Rewards.
export { RewardLedger, type DeliveryResult, type RewardBasis, type RewardDelivery, type RewardEvent, type SlaCounts, type SourceSla, type StepRef } from './reward/ledger.js';
export type { RewardFunction, RewardInput, SettledStep } from './reward/evaluators.js';
export type { JudgeConfig, LlmProvider } from './schema/judge-config.js';
export { createLlmClient, type ChatMessage, type ChatRequest, type ChatResponse, type LlmClient, type LlmClientOptions } from './llm/client.js';

// Runs: episodes with a policy, into a run folder.
export { Run, type RunOptions } from './run/run.js';
export type { RunSummary, SourceSummary } from './run/run-summary.js';
export type { EpisodeEndReason, LlmRunConfig, RunConfig, RunEvent, SettledStepEvent } from './events/run-events.js';
export type { PendingCall, RecentReward, RunProgress, ToolStats } from './run/run-stats.js';
export { loadPolicy, randomPolicy, type Observation, type Policy, type PolicyContext, type PolicyTask } from './run/policy.js';
export { makePolicy, type PolicySetup, type RunPolicy } from './run/policy-factory.js';
export type { ProgramLimits } from './run/program-episode.js';
export type { LlmPolicySettings } from './run/llm-agent.js';

// State: stores, patches, lifecycles.
export { MemoryStateStore } from './state/memory-store.js';
export type { Delta, Snapshot, StateBounds, StatePoint, StateStore, StateStoreOptions, TrimResult } from './state/store.js';
export { applyPatch, type Patch, type PatchOperation } from './state/patch.js';
export { plainJson } from './state/wide-object.js';
export type { LifecycleStatus } from './lifecycle/lifecycle.js';

// Errors, and what tools and policies share.
export { AgentError, ToolError, UsageError, ValidationError, describeError, formatIssues, isAgentError, type ErrorCode, type Issue } from './shared/errors.js';
export { ERROR_CODES, type ErrorCodeInfo } from './shared/error-codes.js';
export { systemClock, type Clock } from './shared/clock.js';
export { Rng } from './shared/rng.js';
export { sleep } from './shared/abort.js';
export type { JsonObject, JsonValue } from './shared/json.js';

/** The in-memory form of an environment definition, after loading and validation. */
import type { Issue } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import type { AllowedHost } from '../sandbox/egress.js';
import type { SandboxLimits } from '../sandbox/sandbox.js';
import type { JsonSchema } from './ajv.js';
import type { CompiledCondition } from './enabled-if.js';
import type { JudgeConfig } from './judge-config.js';
import type { Unsatisfiable } from './satisfiable.js';

/** Resilience policy of one tool. Every field is optional; absent means "off" (timeout: 30 s). */
export interface ToolPolicy {
  /** Per attempt. The handler's AbortSignal fires when it elapses. */
  readonly timeoutMs?: number;
  /** Retries retryable failures only, with exponential backoff and jitter. */
  readonly retry?: { readonly maxAttempts: number; readonly initialDelayMs: number; readonly maxDelayMs: number };
  /** Opens after `failures` consecutive failures; a probe call is let through after `halfOpenAfterMs`. */
  readonly circuitBreaker?: { readonly failures: number; readonly halfOpenAfterMs: number };
  /** At most this many calls of the tool run at once (bulkhead); `queue` more may wait. */
  readonly concurrency?: number;
  readonly queue?: number;
  /** Used when the call still fails after retries (or the breaker is open). */
  readonly fallback?: { readonly observation: JsonValue } | { readonly action: string };
  /** `worker` runs an in-process handler in a worker thread, so CPU-bound work cannot stall other agents. */
  readonly isolate?: 'none' | 'worker';
  /** Calling twice with the same params does what calling once does: a call lost in a crash may be re-run on resume. */
  readonly idempotent?: boolean;
  /** USD per call (a paid API), counted in a benchmark's cost. */
  readonly costUsd?: number;
}

/**
 * An env's sandbox (env.json `sandbox`): each episode gets a workspace of its own, seeded from the
 * env's files and the episode's state, kept across its calls and wiped at reset; sandbox tools and
 * module tools (`ctx.sandbox`) run commands in it; after each call that ran one, the workspace's
 * file listing is written into the state.
 */
export interface SandboxSpec {
  /** A folder copied into every episode's workspace (absolute). */
  readonly files?: string;
  /** A JSON pointer in the state to an object `{path: text}` of files written into the workspace at its start (a task's own files). */
  readonly filesFrom?: string;
  /** A JSON pointer in the state where the listing goes (`{files: {path: {sha256, size}}}`); null: nowhere. */
  readonly listingTo: string | null;
  readonly limits: Partial<SandboxLimits>;
  /** Hosts its commands may reach over HTTP(S), through a proxy that admits only them; none: no network at all. */
  readonly allowHosts?: readonly AllowedHost[];
}

/** Where an action's tool runs: a function of the tools module, a process, an HTTP endpoint, or an MCP server's tool. */
export type ToolBinding =
  | { readonly kind: 'module'; readonly module: string; readonly exportName: string }
  | {
      readonly kind: 'subprocess';
      readonly command: readonly string[];
      readonly cwd: string;
      readonly env?: Readonly<Record<string, string>>;
      readonly persistent?: boolean;
      /** Cap on what one call may write to stdout (default 16 MB): past it, TOOL_OUTPUT_TOO_LARGE. */
      readonly maxOutputBytes?: number;
    }
  | { readonly kind: 'http'; readonly url: string; readonly headers?: Readonly<Record<string, string>>; readonly maxOutputBytes?: number }
  | {
      /** Runs a command in the episode's sandbox (env.json `sandbox`); its result is the observation. */
      readonly kind: 'sandbox';
      /** Each argument a template: `{name}` is the param's value (a string as it is, anything else as JSON), `{{` and `}}` are braces. */
      readonly command: readonly string[];
      /** A template written to the command's stdin. */
      readonly stdin?: string;
      /** This tool's limits over the env's. */
      readonly limits?: Partial<SandboxLimits>;
    }
  | {
      readonly kind: 'mcp';
      /** The name of the server in `mcp_servers`. */
      readonly server: string;
      /** The server's name of the tool. */
      readonly tool: string;
      /** A JSON pointer in the state where each call's result is written (an `add` patch). */
      readonly resultTo?: string;
      /** Imported with `actions_from`: the action follows the server's tools/list_changed. */
      readonly imported?: true;
      /** Cap on one reply (default 16 MB): past it, TOOL_OUTPUT_TOO_LARGE. */
      readonly maxOutputBytes?: number;
    };

/** A tool as an MCP server lists it (the part the toolkit reads; the SDK's own type stays internal). */
export interface McpToolInfo {
  readonly name: string;
  readonly description?: string | undefined;
  readonly inputSchema: JsonSchema;
  readonly outputSchema?: JsonSchema | undefined;
}

/** An MCP server the env's tools call (env.json `mcp_servers`). */
export type McpServerSpec = {
  readonly name: string;
  /** One server per env instance, closed when the instance is released. */
  readonly perInstance: boolean;
  /** How long the server may take to answer `initialize`. */
  readonly startupTimeoutMs: number;
} & (
  | { readonly transport: 'stdio'; readonly command: readonly string[]; readonly cwd: string; readonly env?: Readonly<Record<string, string>> }
  | { readonly transport: 'http'; readonly url: string; readonly headers?: Readonly<Record<string, string>> }
);

/** An action of an env: its parameters schema, `enabled_if` condition, tool binding and policy (timeout, retries, idempotency). */
export interface ActionDefinition {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of the params object. */
  readonly parameters: JsonSchema;
  readonly enabledIf?: CompiledCondition;
  /** `user`: the action belongs to the episode's other side (τ²-bench's phone); dispatched only as `{actor: 'user'}`. */
  readonly actor?: 'user';
  /** Where the action was declared, for error messages. */
  readonly source: { readonly file: string; readonly pointer: string };
  /** Set when the parameter schema admits no value: the action can never be called. */
  readonly unsatisfiable?: Unsatisfiable;
  readonly policy: ToolPolicy;
  readonly binding?: ToolBinding;
}

export type RewardAggregation = 'sum' | 'mean' | 'last' | 'min' | 'max';

/** A reward source of an env: its schema, binding (tool, module, judge, service), delay, deadline, aggregation, weight and fallback. */
export interface RewardSourceDefinition {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of one reward value (range and type). */
  readonly schema: JsonSchema;
  /** Expected delay between the step and the reward's arrival. 0 = delivered with the tool result. */
  readonly delayMs: number;
  readonly deadlineMs?: number;
  readonly aggregation: RewardAggregation;
  /** Multiplier in the scalar `reward` of a step (default 1). */
  readonly weight: number;
  readonly fallback?: RewardFallback;
  /** Where the value comes from (env.json `reward_sources`; default: the tool when `delay_ms` is 0, else external). */
  readonly binding: RewardBinding;
}

/** What a source's missing reward becomes at its deadline: a fixed value, or the mean of what has arrived. */
export type RewardFallback = { readonly value: number } | { readonly strategy: 'historical_mean' };

/**
 * Where a reward source's values come from:
 * - `tool`: in the tool's result, with the step;
 * - `module`: an async function of the step (a reward model, a rule checker), run off the step's
 *   critical path under its own timeout, retry and concurrency;
 * - `judge`: an LLM judge (Anthropic or an OpenAI-compatible server);
 * - `service`: an evaluator behind HTTP (evaluation as a service): the judgement is POSTed as JSON;
 * - `external`: delivered later by someone else (`agent reward`, `POST /rewards`, `env.rewards.submit`).
 */
export type RewardBinding =
  | { readonly kind: 'tool' }
  | { readonly kind: 'module'; readonly module: string; readonly exportName: string; readonly scope: RewardScope; readonly policy: ToolPolicy; readonly when?: CompiledCondition }
  | { readonly kind: 'judge'; readonly judge: JudgeConfig; readonly scope: RewardScope; readonly policy: ToolPolicy; readonly when?: CompiledCondition }
  | { readonly kind: 'service'; readonly url: string; readonly tokenEnv?: string; readonly scope: RewardScope; readonly policy: ToolPolicy; readonly when?: CompiledCondition }
  | { readonly kind: 'external' };

/** `step`: one value per step. `episode`: one value per episode, landing on its last step. */
export type RewardScope = 'step' | 'episode';

/** The bindings whose values the toolkit computes (off the step's critical path): a module, a judge, a service. */
export type ComputedBinding = Extract<RewardBinding, { kind: 'module' | 'judge' | 'service' }>;

export function isComputed(b: RewardBinding): b is ComputedBinding {
  return b.kind === 'module' || b.kind === 'judge' || b.kind === 'service';
}

/** An env as loaded from its folder: name, state schema, actions, reward sources, initial states, and warnings. */
export interface EnvDefinition {
  readonly name: string;
  /** What the env is (env.json's `description`): an llm: policy's default instruction under `agent run`. */
  readonly description?: string;
  /** Absolute path of the env folder. */
  readonly dir: string;
  readonly stateSchema: JsonSchema;
  /** In declaration order. */
  readonly actions: ReadonlyMap<string, ActionDefinition>;
  readonly rewards: ReadonlyMap<string, RewardSourceDefinition>;
  /** States an episode may start from (validated). Empty when the env declares none. */
  readonly initialStates: readonly JsonValue[];
  /** Problems that do not stop loading (an unsatisfiable action, a name OpenAI would reject). */
  readonly warnings: readonly Issue[];
  /** The MCP servers its tools call, by name. */
  readonly mcpServers?: ReadonlyMap<string, McpServerSpec>;
  /** `actions_from`, and the policy a tool a server adds later gets (`tool_defaults`). */
  readonly mcpImports?: { readonly imports: readonly McpImportSpec[]; readonly policy: ToolPolicy };
  /** Its episodes' sandbox (env.json `sandbox`). */
  readonly sandbox?: SandboxSpec;
}

/** One `actions_from` entry: a server's tools, filtered and renamed. */
export interface McpImportSpec {
  readonly server: string;
  readonly include?: readonly string[];
  readonly exclude?: readonly string[];
  readonly rename?: Readonly<Record<string, string>>;
  readonly prefix?: string;
}

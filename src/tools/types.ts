/** The tool-handler contract: `(params, ctx) → {observation, patch?, rewards?, done?}`. */
import type { Rng } from '../shared/rng.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { Patch } from '../state/patch.js';
import type { SandboxLimits, SandboxMechanism, SandboxResult } from '../sandbox/sandbox.js';

/** How {@link EpisodeSandbox.run} runs one command. */
export interface SandboxRunOptions {
  /** Written to the command's stdin (closed otherwise). */
  readonly stdin?: string;
  /** Over the env's limits (env.json `sandbox.limits`). */
  readonly limits?: Partial<SandboxLimits>;
  /** Its environment, besides PATH, HOME (/workspace), LANG and TMPDIR. */
  readonly env?: Readonly<Record<string, string>>;
  /** Aborting it kills the command (a tool's call signal always does). */
  readonly signal?: AbortSignal;
  /** Ports of the host's loopback the command reaches at the same port inside (an agent program's model endpoint); nothing else of the host. */
  readonly forwardPorts?: readonly number[];
  /** Host folders it sees read-only at their own paths (a dataset, an agent program's files and interpreter). */
  readonly readOnly?: readonly string[];
  /** Keep the last `output_bytes` of stdout and stderr instead of the first (what a failed program said last). */
  readonly keep?: 'head' | 'tail';
}

/**
 * The episode's sandbox, in envs with env.json `sandbox`: as a module tool sees it (`ctx.sandbox`;
 * the workspace's listing goes into the state after the call) and as code that drives the episode
 * from outside does (`AgentInstance.sandbox`: an agent program's runner). Commands run in the
 * episode's workspace (at `/workspace`, their working folder) under the env's limits.
 */
export interface EpisodeSandbox {
  /** Runs `argv` (no shell: each element is one argument) to its end or its limit; the call's signal kills it. */
  run(argv: readonly string[], options?: SandboxRunOptions): Promise<SandboxResult>;
  /** How it isolates (`mode`: `isolated`, or `unsafe-host` when asked for) and bounds (`limits`) its commands. */
  readonly mechanism: SandboxMechanism;
}

/** What a tool gets beside its params: the state, the instance and trace ids, a seeded random generator, an abort signal, and the env's tool options. */
export interface ToolContext {
  /** The instance's current state. Frozen: a handler changes state only by returning a patch. */
  readonly state: JsonValue;
  readonly traceId: string;
  readonly instanceId: string;
  readonly tool: string;
  /** Fires on timeout, on cancel and when the run is interrupted. Pass it to fetch, sleeps, child processes. */
  readonly signal: AbortSignal;
  /** 1 for the first attempt, 2 for the first retry, ... */
  readonly attempt: number;
  /** Seeded per trace (env seed × instance × step), so simulated randomness replays exactly. */
  readonly rng: Rng;
  /**
   * The call's W3C trace context (`00-<trace>-<span>-<flags>`, its `execute_tool` span) when the
   * run is traced (OpenTelemetry). HTTP tools send it as the `traceparent` header, subprocess
   * tools get it as `TRACEPARENT`, MCP calls in `_meta`; pass it on to whatever the tool calls.
   */
  readonly traceparent?: string;
  /**
   * The episode's sandbox, in an env that declares one (env.json `sandbox`); undefined otherwise,
   * and in tools isolated in a worker thread.
   */
  readonly sandbox?: EpisodeSandbox;
}

/** What a tool returns: its observation, a patch to the state, rewards by source, and whether the episode is done. */
export interface ToolResult {
  /** What the agent sees. */
  readonly observation?: JsonValue;
  /** RFC 6902 JSON Patch against the state; validated against the state schema before it is committed. */
  readonly patch?: Patch;
  /** Immediate rewards by source name; each source must be declared in reward_schema.json. */
  readonly rewards?: Readonly<Record<string, number | boolean>>;
  /** Ends the episode. */
  readonly done?: boolean;
}

/** A tool: params and context in, its result out (or a promise of it). */
export type ToolHandler<P extends JsonObject = JsonObject> = (params: P, ctx: ToolContext) => ToolResult | Promise<ToolResult>;

/** What a tools module's optional `createTools` export receives. */
export interface ToolModuleConfig {
  readonly seed: number;
  /** Free-form options (`agent run --tool-option key=value`), e.g. a latency scale for simulated tools. */
  readonly options: Readonly<Record<string, JsonValue>>;
}

/**
 * A tools module exports one handler per action name, or a `createTools(config)` factory that
 * returns them (use it when handlers need the seed or options).
 */
export type ToolFactory = (config: ToolModuleConfig) => Record<string, ToolHandler> | Promise<Record<string, ToolHandler>>;

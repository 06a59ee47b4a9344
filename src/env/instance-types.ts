/** The public shapes of an agent instance's API: what `dispatch`, `resolve` and `step` take and give. */
import type { ActionDefinition } from '../schema/definition.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { EnvEventOf, ErrorInfo, RewardEntry, TraceStatus } from '../events/env-events.js';

/**
 * A call the policy chooses: the action's name and its parameters, and who makes it: the agent
 * (the default) or, in an env with two sides (τ²-bench telecom), the user, on an action declared
 * `"actor": "user"`.
 */
export interface Action {
  readonly name: string;
  readonly params?: JsonObject;
  readonly actor?: Actor;
}

/** Who makes a call: the agent, or the simulated user of an env with two sides. */
export type Actor = 'agent' | 'user';

/** What a policy may choose from: the actions enabled in the current state. */
export interface AvailableAction {
  readonly name: string;
  readonly description?: string;
  readonly parameters: ActionDefinition['parameters'];
}

/** What a settled call reports beside its reward: trace id, status, step and seq numbers, duration, attempts, and its error when it failed. */
export interface StepInfo {
  readonly trace_id: string;
  readonly status: TraceStatus;
  readonly action: string;
  /** 1-based index of the step in its episode, in settle order (0 while it has not settled). */
  readonly step: number;
  /** Seq of the state this result reflects. */
  readonly seq: number;
  readonly duration_ms: number;
  readonly attempts: number;
  readonly error?: ErrorInfo;
  /** Set when a fallback answered instead of the tool. */
  readonly fallback?: string;
}

/** A settled call: the state after it, the tool's observation, its reward (and per source), whether the episode is done, and `info`. */
export interface StepResult {
  readonly state: JsonValue;
  readonly observation?: JsonValue;
  /**
   * Σ weight × value of the rewards that have arrived for this step so far. Delayed sources land
   * later (`reward_arrived` events, `env.rewards.reward(traceId)`).
   */
  readonly reward: number;
  readonly rewards: Readonly<Record<string, RewardEntry>>;
  readonly done: boolean;
  readonly info: StepInfo;
}

/** How `resolve` waits: an abort signal, and a timeout after which a call still running comes back with status `timeout`. */
export interface ResolveOptions {
  /** Give up waiting after this long and return a partial result with status `timeout`; the call goes on. */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

/** Hooks: sugar over the events of one instance. A throwing hook is reported as an `error` event. */
export interface InstanceHooks {
  readonly onToolCallStart?: (event: EnvEventOf<'tool_started'>) => void;
  readonly onToolCallEnd?: (event: EnvEventOf<'tool_finished'>) => void;
  readonly onStateChange?: (event: EnvEventOf<'state_committed'>) => void;
  readonly onRewardReceived?: (event: EnvEventOf<'reward_arrived'>) => void;
  readonly onLifecycle?: (event: EnvEventOf<'lifecycle_changed'>) => void;
}

/** A call dispatched and not settled yet: its trace id, action, and when it started. */
export interface PendingTrace {
  readonly traceId: string;
  readonly action: string;
  readonly startedAt: number;
}

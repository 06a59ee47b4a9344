/**
 * The typed events of the core. Every output (the live view, the run folder, JSON lines, the
 * debug console) is a subscriber; the core itself never prints. All events carry the event
 * time (epoch ms) and the instance id; trace-scoped ones carry the trace id.
 */
import type { LifecycleStatus } from '../lifecycle/lifecycle.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { Patch } from '../state/patch.js';

/**
 * Where a step's value from one reward source stands:
 * `pending` (not yet), `arrived` (in time), `fallback` (imputed at its deadline, or because the
 * source failed), `late` (arrived after its deadline: kept beside the imputed value), `failed`
 * (the source could not produce one and has no fallback).
 */
export type RewardStatus = 'pending' | 'arrived' | 'fallback' | 'late' | 'failed';

/** One source's part of a step's reward. A record shape (trajectories, exports): snake_case. */
export interface RewardEntry {
  readonly status: RewardStatus;
  /**
   * The value the step's `reward` uses: the arrived value (several combined by the source's
   * `aggregation`), the imputed one for `fallback` and `late`, the late one when nothing was
   * imputed; null while pending or failed.
   */
  readonly value: number | null;
  /** Event time (epoch ms) of the first arrival; null if none yet. */
  readonly arrived_at: number | null;
  /** Actual delay from the step to that arrival; null if none yet. */
  readonly delay_ms: number | null;
  /** Pending: when the value is expected (the step's time + the source's declared `delay_ms`). */
  readonly expected_at?: number;
  /** When the source's fallback applies, if it declares `deadline_ms`. */
  readonly deadline_at?: number;
  readonly imputed?: RewardImputation;
  /** The value that arrived after the deadline (status `late`). */
  readonly late_value?: number;
  /** Why the source failed (status `failed`, or the reason of a fallback). */
  readonly error?: string;
  /** Values combined, when more than one arrived (distinct idempotency keys). */
  readonly count?: number;
}

/** What one judgement cost: tokens, and money when the model's price is known (null otherwise). */
export interface CallCost {
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly usd: number | null;
}

export interface RewardImputation {
  readonly value: number;
  readonly strategy: 'value' | 'historical_mean';
  /** For `historical_mean`: how many arrived values of the same source and action it averages. */
  readonly sample_size?: number;
  readonly reason: string;
}

/** How a call settled: `resolved`, `failed`, or `timeout` (still running when `resolve` stopped waiting). */
export type TraceStatus = 'resolved' | 'timeout' | 'failed';

/** An error as records carry it: code and message, and when known the hint, the tool, whether a retry may succeed, and the validation issues with their pointers. */
export interface ErrorInfo {
  readonly code: string;
  readonly message: string;
  readonly hint?: string;
  readonly tool?: string;
  readonly retryable?: boolean;
  /** For a schema violation: where (JSON pointer), what, and the offending value (first 20). */
  readonly issues?: readonly { readonly pointer: string; readonly message: string; readonly value?: JsonValue }[];
}

interface Base {
  readonly time: number;
  readonly instance_id: string;
}

/** Reward events say which step they land on: its trace, its episode and its 1-based step index. */
interface RewardBase extends Base {
  readonly trace_id: string;
  readonly episode: number;
  readonly step: number;
  readonly source: string;
}

export type RewardEventType = 'reward_arrived' | 'reward_late' | 'reward_imputed' | 'reward_failed' | 'reward_expected';

/**
 * One generated turn of token mode, as its `llm_call` event records it: the ids the environment
 * added before it (the whole first prompt for the first turn), the prompt's length then, and what
 * the server generated, exactly.
 */
export interface TokenTurn {
  /** Ids the environment added since the previous turn (not generated, not trained on); the first turn: the whole first prompt. */
  readonly env_ids: readonly number[];
  /** The prompt's length when this turn was generated (every id before its first generated one). */
  readonly prompt_length: number;
  /** The generated ids, the end-of-turn token included when the model stopped on it. */
  readonly token_ids: readonly number[];
  /** The sampler's log-probability of each generated id. */
  readonly logprobs: readonly number[];
  /** The generated text as the server detokenized it. */
  readonly text: string;
  /** Each generated id's text, as the server gave it (vLLM's `logprobs.tokens`), when it did. */
  readonly token_strs?: readonly string[];
  /** `stop` or `length`, as the server said. */
  readonly finish_reason: string;
  /** The stop string or token id that stopped it; null for the model's EOS. */
  readonly stop_reason?: number | string | null;
  /** The model name the server answered with. */
  readonly model: string;
  /** The request's sampling seed. */
  readonly seed: number;
  /**
   * How the turn was sampled, and the seed its requests' seeds are drawn from: what a token record
   * of the episode says (`sampling`) where the run's config does not (a served run's rollouts, each
   * request with its own).
   */
  readonly sampling?: { readonly temperature: number; readonly top_p: number; readonly max_tokens: number; readonly seed: number };
  /** The text could not be read as the tool parser reads calls: why (the turn counts as an invalid action). */
  readonly invalid?: string;
  /**
   * The weights' version the turn was generated with: the server's own report when it gives one,
   * else the version the trainer last declared (`agent serve`'s rollouts); absent when neither said.
   */
  readonly weight_version?: number;
  /**
   * The turn is a task's gold action rendered by the chat template as the model's turn
   * (`--policy gold --tokens`: data for a supervised warm start), not sampled: `logprobs` is empty.
   */
  readonly gold?: true;
  /** The chat template re-rendered its prefix when the environment's messages followed it: `env_ids` are the template's, not an exact continuation; `at` is the first token that differed. */
  readonly drift?: { readonly at: number; readonly message: string };
  /**
   * A captured program's turn (`--policy cmd:`): the sequence it belongs to, from 0 (absent: 0). A
   * request whose messages do not extend a sequence so far (a compacted history, a sub-agent)
   * starts a new one; generated ids are never re-encoded.
   */
  readonly segment?: number;
}

/** Everything an env emits, one union discriminated by `type`: tool calls starting and finishing, commits, rewards arriving, late or imputed, lifecycle changes, loop lag. */
export type EnvEvent =
  | (Base & { readonly type: 'dispatched'; readonly trace_id: string; readonly action: string; readonly params: JsonObject; readonly episode: number })
  | (Base & { readonly type: 'tool_started'; readonly trace_id: string; readonly tool: string })
  | (Base & {
      readonly type: 'tool_finished';
      readonly trace_id: string;
      readonly tool: string;
      readonly ok: boolean;
      readonly duration_ms: number;
      readonly attempts: number;
      readonly error?: ErrorInfo;
      readonly fallback?: string;
    })
  | (Base & { readonly type: 'state_committed'; readonly trace_id: string; readonly seq: number; readonly patch: Patch })
  /** `cost`: what an LLM judge's calls for this value cost (re-asks included). */
  | (RewardBase & { readonly type: 'reward_arrived'; readonly value: number; readonly key: string; readonly delay_ms: number; readonly reward: number; readonly cost?: CallCost })
  /** A value that arrived after its source's deadline; the step keeps its imputed value (if any) in `reward`. */
  | (RewardBase & { readonly type: 'reward_late'; readonly value: number; readonly key: string; readonly delay_ms: number; readonly reward: number })
  | (RewardBase & { readonly type: 'reward_imputed'; readonly value: number; readonly strategy: RewardImputation['strategy']; readonly sample_size?: number; readonly reason: string; readonly reward: number })
  | (RewardBase & { readonly type: 'reward_failed'; readonly reason: string })
  /** A source that will judge this step later and was not announced with it: an episode-scoped source, on the episode's last step. */
  | (RewardBase & { readonly type: 'reward_expected'; readonly deadline_at?: number })
  | (Base & {
      readonly type: 'trace_settled';
      readonly trace_id: string;
      readonly episode: number;
      /** 1-based index of the step in its episode, in settle order. */
      readonly step: number;
      readonly action: string;
      /** Set when the env's other side made the call (a τ²-bench user on their phone); the agent's calls have none. */
      readonly actor?: 'user';
      readonly params: JsonObject;
      /** Seq of the state the action was chosen on (what the policy saw). */
      readonly seq_before: number;
      readonly status: Exclude<TraceStatus, 'timeout'>;
      readonly observation?: JsonValue;
      readonly reward: number;
      readonly rewards: Readonly<Record<string, RewardEntry>>;
      readonly done: boolean;
      readonly seq: number;
      readonly duration_ms: number;
      readonly error?: ErrorInfo;
    })
  | (Base & { readonly type: 'lifecycle_changed'; readonly from: LifecycleStatus; readonly to: LifecycleStatus; readonly episode: number })
  | (Base & { readonly type: 'loop_blocked'; readonly trace_id: string; readonly tool: string; readonly blocked_ms: number })
  /**
   * A model call, as it ended: the policy's (`policy`) and its simulated user's (`user`) while
   * choosing the episode's next action (`step`: the step being chosen), or an LLM judge's (`judge`)
   * on the step `trace_id` for reward `source`. `time` is when it ended.
   */
  | (Base & {
      readonly type: 'llm_call';
      readonly role: 'policy' | 'user' | 'judge';
      readonly provider: string;
      readonly model: string;
      readonly duration_ms: number;
      readonly input_tokens: number;
      readonly output_tokens: number;
      readonly episode: number;
      readonly step: number;
      readonly trace_id?: string;
      readonly source?: string;
      readonly error?: string;
      /** Token mode (`--tokens`): the turn's ids as the inference server saw and produced them. */
      readonly tokens?: TokenTurn;
    })
  /** The loop lagged and no single call's synchronous part explains it; `instanceId` is '' (env-wide). */
  | (Base & { readonly type: 'loop_lag'; readonly lag_ms: number; readonly in_flight: readonly { readonly trace_id: string; readonly tool: string }[] })
  | (Base & { readonly type: 'error'; readonly trace_id?: string; readonly error: ErrorInfo })
  /**
   * An MCP server's tool list changed (`notifications/tools/list_changed`); `instanceId` is ''
   * (env-wide). `added`, `removed` and `changed` name the server's tools (a changed input schema
   * with its schema-diff findings); `actions` says what that did to the actions imported from it
   * (`actions_from`), which follow the list. Actions bound by hand stay as declared.
   */
  | (Base & {
      readonly type: 'mcp_tools_changed';
      readonly server: string;
      readonly added: readonly string[];
      readonly removed: readonly string[];
      readonly changed: readonly { readonly tool: string; readonly findings: readonly { readonly rule: string; readonly severity: string; readonly message: string }[] }[];
      readonly actions: { readonly added: readonly string[]; readonly removed: readonly string[]; readonly changed: readonly string[] };
    });

/** The `type` of every env event. */
export type EnvEventType = EnvEvent['type'];
/** The env event of one `type`. */
export type EnvEventOf<T extends EnvEventType> = Extract<EnvEvent, { type: T }>;

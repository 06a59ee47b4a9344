/** Events of a run: every env event, plus the run's own. */
import type { SandboxMechanism } from '../sandbox/sandbox.js';
import type { EnvEvent, EnvEventOf, ErrorInfo } from './env-events.js';

/** A settled step as a run reports it: with the actions the policy chose among. */
export type SettledStepEvent = EnvEventOf<'trace_settled'> & { readonly available_actions?: readonly string[] };

/**
 * `worker_lost`: a distributed run's episode whose worker died every time it ran it (retried, then
 * given up). `client_closed`: a served episode its client left before it was done (a reset, a
 * close, a connection that closed, an idle HTTP session): truncated. `client_lost`: a served episode
 * whose WebSocket peer stopped answering (no pong, or no reading, for the server's `--ws-timeout`):
 * its session was ended and its slot freed; truncated. `context_limit`: an llm: policy in token mode
 * whose next prompt would not fit the model's context (its error says by how much); truncated.
 * `time_limit`: an agent program (`--policy cmd:`) still running at the episode's wall-time limit:
 * its process tree was killed; truncated. `max_turns`: an agent program that asked for a model call
 * past its turn limit (`--max-turns`); truncated.
 */
export type EpisodeEndReason = 'done' | 'max_steps' | 'policy_stop' | 'no_actions' | 'policy_error' | 'interrupted' | 'worker_lost' | 'client_closed' | 'client_lost' | 'context_limit' | 'time_limit' | 'max_turns';

/** A worker of a distributed run as its coordinator sees it. */
export interface WorkerRow {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly running: number;
  readonly concurrency: number;
}

/** A run's settings as recorded in run.json: env, episodes, concurrency, step limit, seed, policy, and trace sampling. */
export interface RunConfig {
  readonly env: string;
  /** 0 for a served run (`agent serve`): its clients open as many episodes as they like. */
  readonly episodes: number;
  /** A served run: how many sessions at once. */
  readonly concurrency: number;
  /** A run spread over worker threads (`--threads`): how many (absent: one thread). */
  readonly threads?: number;
  readonly max_steps: number;
  readonly seed: number;
  readonly policy: string;
  /** A traced run (OpenTelemetry): the share of episodes whose spans are exported; its workers hand their tools the same trace context. */
  readonly trace_sampling?: number;
  /** An `llm:<model>` policy: where it was served and how every request was sampled. */
  readonly llm?: LlmRunConfig;
  /** The env's sandbox: how its commands were isolated (`unsafe-host`: not at all) and bounded. */
  readonly sandbox?: SandboxMechanism;
}

/** An llm: policy as run.json records it (`config.llm`): the model, where it was served, and in token mode the sampling settings of every request. */
export interface LlmRunConfig {
  readonly model: string;
  readonly provider: 'anthropic' | 'openai';
  readonly base_url?: string;
  readonly user?: string;
  readonly tokens: boolean;
  readonly sampling: { readonly temperature: number; readonly top_p: number; readonly max_tokens: number; readonly seed: number };
  readonly tool_parser?: string;
  /** Token mode: the context limit in force, and the server's. */
  readonly max_context?: number;
  readonly max_model_len?: number;
}


/** Everything a run emits (its env's events too), one union discriminated by `type`: what the live view, `--json` and events.jsonl show. */
export type RunEvent =
  | Exclude<EnvEvent, { type: 'trace_settled' }>
  | SettledStepEvent
  /** `port`, `url`: the run's local server, when started with one (POST /rewards; its token is in server.json, never in events). */
  /** `startedAt`: when the run first started (earlier than `time` for a resumed run). */
  | { readonly type: 'run_started'; readonly time: number; readonly started_at?: number; readonly run_id: string; readonly dir: string; readonly config: RunConfig; readonly port?: number; readonly url?: string }
  /** `initialStateId` names the episode's initial state in states.jsonl. */
  | { readonly type: 'episode_started'; readonly time: number; readonly instance_id: string; readonly episode: number; readonly initial_state_id: string }
  | {
      readonly type: 'episode_finished';
      readonly time: number;
      readonly instance_id: string;
      readonly episode: number;
      readonly steps: number;
      readonly reward: number;
      readonly reason: EpisodeEndReason;
      readonly duration_ms: number;
      readonly error?: ErrorInfo;
    }
  /** After the env closed: calls whose handler ignored its AbortSignal and is still running. */
  | { readonly type: 'calls_abandoned'; readonly time: number; readonly calls: readonly { readonly tool: string; readonly trace_id: string }[] }
  | { readonly type: 'run_finished'; readonly time: number; readonly run_id: string; readonly status: 'completed' | 'interrupted' }
  /**
   * The run continued after its process stopped: steps and finished episodes found in its journal,
   * calls that were in flight (re-run if idempotent, else settled as TOOL_LOST), and steps the run
   * folder showed that Redis no longer had (lost by a Redis restart; kept in trajectories.lost.jsonl).
   */
  | { readonly type: 'run_resumed'; readonly time: number; readonly run_id: string; readonly steps: number; readonly episodes_finished: number; readonly inflight: number; readonly lost_steps: number }
  /** The state store stopped answering: the run waits (with backoff) for it, up to its store wait. */
  | { readonly type: 'store_unavailable'; readonly time: number; readonly store: string; readonly since: number }
  | { readonly type: 'store_recovered'; readonly time: number; readonly store: string; readonly down_ms: number }
  /** A distributed run's live workers, whenever they change (none: nobody is taking its episodes). */
  | { readonly type: 'workers'; readonly time: number; readonly queue: string; readonly workers: readonly WorkerRow[] }
  /** `agent serve` rollouts: a group's episodes were not sent (too many weight versions behind, filtered out by the request, or surplus once enough groups were in); they stay in the folder, marked by this. */
  | { readonly type: 'rollout_discarded'; readonly time: number; readonly task_id: string; readonly group_id: string; readonly episodes: readonly number[]; readonly reason: 'stale' | 'zero_variance' | 'reward_range' | 'surplus'; readonly staleness: number | null; readonly then: 'rerun' | 'drop' | 'replace' }
  /** Something the user should see that is neither a step nor a failure: a slow /events client cut off (`CLIENT_DROPPED`), a worker that refused an episode (`ENV_MISMATCH`). */
  | { readonly type: 'notice'; readonly time: number; readonly code: string; readonly message: string };

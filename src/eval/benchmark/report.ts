/** The shape of benchmark.json (schemas/benchmark-report.schema.json) and what metric modules see. */
import type { JudgeUsage } from './judge.js';
import type { SettledStepEvent } from '../../events/run-events.js';
import type { JsonValue } from '../../shared/json.js';
import type { PiiFinding } from './pii.js';
import type { Estimate } from './stats.js';

/** One episode: a task's trial, scored. */
export interface TrialResult {
  readonly trial: number;
  readonly episode: number;
  readonly success: boolean;
  readonly reward: number;
  readonly steps: number;
  readonly reason: string;
  /** state_match: whether the final state matched, and which outputs the agent never said. */
  readonly checks?: { readonly state_match: boolean; readonly outputs_missing: readonly string[] };
  /** A module check's score by component (τ²-bench: DB, ENV_ASSERTION, ACTION, COMMUNICATE), each 0 to 1. */
  readonly components?: Readonly<Record<string, number>>;
  /** Components the task's scoring names but this run could not score (τ²'s NL_ASSERTION without a judge): left out of success. */
  readonly not_scored?: readonly string[];
  /** What a module check reports beside its verdict (τ²-bench: its reward and the DB hashes). */
  readonly details?: Readonly<Record<string, JsonValue>>;
  /** What the episode cost: LLM tokens (agent and simulated user) and USD, tool calls' declared `cost_usd` included (`tool_usd`); usd null when a model's price is unknown. */
  readonly cost?: { readonly input_tokens: number; readonly output_tokens: number; readonly usd: number | null; readonly tool_usd: number };
  /** Personal data the agent said or sent that is not the task user's, with the evidence. */
  readonly pii?: readonly PiiFinding[];
  /** The episode's own values of the custom metrics (`--metric`), by the names the report aggregates them under. */
  readonly metrics?: Readonly<Record<string, number>>;
  readonly error?: string;
}

/** What a metric module is given per episode. */
export interface MetricEpisode {
  readonly task: string;
  readonly trial: number;
  readonly success: boolean;
  readonly reward: number;
  readonly steps: readonly SettledStepEvent[];
  readonly final_state: JsonValue;
}

/** Per tool in a benchmark: calls, the share that succeeded, and latency percentiles. */
export interface ToolMetrics {
  readonly calls: number;
  readonly success_rate: number;
  readonly latency_ms: { readonly p50: number; readonly p95: number; readonly p99: number };
}

/** A benchmark's results (benchmark.json): success rate with its confidence interval, pass^k, rewards, per-task trials, per-tool metrics and the run folder. */
export interface BenchmarkReport {
  readonly schema_version: 1;
  readonly suite: string;
  readonly split: string;
  readonly policy: string;
  readonly trials: number;
  readonly seed: number;
  readonly run_dir: string;
  /** The judge the suite's checks asked (`--judge llm:<model>`), and what it cost over the benchmark. */
  readonly judge?: { readonly model: string } & Readonly<JudgeUsage>;
  readonly started_at: string;
  readonly duration_ms: number;
  readonly metrics: {
    readonly success_rate: Estimate;
    /** pass^k for k = 1 … trials. */
    readonly pass_hat_k: Readonly<Record<string, number>>;
    readonly reward: Estimate;
    /** Per source: its values summed per episode. */
    readonly reward_by_source: Readonly<Record<string, Estimate>>;
    readonly steps_per_episode: Estimate;
    /** Per episode: the share of its calls that worked (a failed step, or an error observation for suites that answer errors as text). */
    readonly tool_success_rate: Estimate;
    /** Per episode: actions the env refused (unknown, disabled, bad params) over actions tried. */
    readonly invalid_action_rate: Estimate;
    /** Per episode, over episodes whose model calls have a known price (llm: policies). */
    readonly cost?: { readonly usd_per_episode: Estimate | null; readonly tokens_per_episode: Estimate };
    /** Share of episodes in which the agent said or sent another user's personal data. */
    readonly pii_leak_rate: Estimate;
    /** Share of tasks an agent that does nothing passes (state_match tasks whose gold leaves the state as it was and says nothing; module checks that pass an episode with no step): the floor to read success against. */
    readonly do_nothing_floor: number;
    /** What the metric modules computed, per episode, aggregated: by module name (and key, `name.key`). */
    readonly custom?: Readonly<Record<string, Estimate>>;
    readonly tools: Readonly<Record<string, ToolMetrics>>;
  };
  readonly tasks: readonly { readonly id: string; readonly trials: readonly TrialResult[] }[];
  /** With a baseline (`--baseline`): how this run compares with it. */
  readonly baseline?: BaselineComparison;
}

/** One metric against the baseline: both values, their difference with its confidence interval, the regression allowed, and whether it is one. */
export interface MetricComparison {
  readonly metric: string;
  readonly current: number;
  readonly baseline: number;
  /** current − baseline over paired (task, trial) episodes, with its 95% interval. */
  readonly difference: Estimate & { readonly pairs: number };
  readonly allowed: number;
  /** The whole interval lies beyond the allowed change in the bad direction. */
  readonly regression: boolean;
}

/** A benchmark report against its baseline: every metric compared, and whether any regressed. */
export interface BaselineComparison {
  readonly baseline: string;
  readonly metrics: readonly MetricComparison[];
  /** Paired by task and trial: a win is a success where the baseline failed; ties count half. */
  readonly win_rate: Estimate & { readonly wins: number; readonly losses: number; readonly ties: number };
  /** Tasks whose success changed in some paired trial. */
  readonly flipped: readonly { readonly id: string; readonly trial: number; readonly now: boolean; readonly before: boolean }[];
  readonly regressed: boolean;
}


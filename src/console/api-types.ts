/**
 * What the web console's JSON API answers (`/api/*`), shared by the server (console-api.ts) and
 * the page (web/): one definition, so the two cannot drift. Field names are snake_case, as in
 * every JSON the toolkit writes or returns; times are epoch milliseconds.
 */
import type { JsonValue } from '../shared/json.js';

export type RewardStatusName = 'pending' | 'arrived' | 'fallback' | 'late' | 'failed';
export type RewardCounts = Readonly<Record<RewardStatusName, number>>;

/** What the feed is doing: indexing a folder (with progress), following it, finished, or attached live. */
export interface FeedState {
  readonly phase: 'indexing' | 'following' | 'finished' | 'live' | 'reconnecting';
  readonly progress?: number;
  readonly error?: string;
  /** Bumped on every change to the index: a page refetches only when it moved. */
  readonly version: number;
  readonly events: number;
}

export interface Overview {
  readonly title: string;
  readonly feed: FeedState;
  readonly run?: {
    readonly run_id: string;
    readonly env: string;
    readonly policy: string;
    readonly episodes: number;
    readonly started_at: number;
    readonly finished_at?: number;
    readonly status: 'running' | 'completed' | 'interrupted';
  };
  readonly traces: { readonly total: number; readonly pending: number; readonly settled: number; readonly failed: number };
  readonly episodes: { readonly seen: number; readonly finished: number };
  /** Steps settled per second over the last few seconds of the run (live) or over the whole run (finished). */
  readonly steps_per_s: number | null;
  /** Steps settled in each bucket of `bucket_ms`, from the run's start: the throughput chart. */
  readonly throughput: { readonly bucket_ms: number; readonly start: number; readonly counts: readonly number[] };
  readonly errors_by_tool: readonly { readonly tool: string; readonly code: string; readonly count: number }[];
  /** Each reward source's counts and its SLA: the share of settled values that arrived before their deadline. */
  readonly rewards: readonly { readonly source: string; readonly counts: RewardCounts; readonly on_time: number | null }[];
  readonly violations: number;
  /** The run's latest event time: "now" for a finished run. */
  readonly last_time: number;
  readonly benchmark?: BenchmarkDigest;
  /** An `agent serve` run's rollouts curriculum (curriculum.json). */
  readonly curriculum?: CurriculumDigest;
}

/** curriculum.json in brief: its tasks, those the difficulty sampler favours first. */
export interface CurriculumDigest {
  readonly draws: number;
  readonly tasks: readonly {
    readonly id: string;
    readonly episodes: number;
    readonly mean_reward: number;
    /** The success rate of its recent episodes. */
    readonly recent_success: number | null;
    /** Its weight for the difficulty sampler. */
    readonly weight: number;
    readonly weight_version: number | null;
  }[];
}

/** A benchmark run's report (benchmark.json) in brief. */
export interface BenchmarkDigest {
  readonly suite: string;
  readonly policy: string;
  readonly trials: number;
  readonly duration_ms: number;
  readonly success_rate?: { readonly value: number; readonly ci_low: number; readonly ci_high: number };
  readonly tasks: readonly { readonly id: string; readonly success: boolean; readonly episodes: readonly number[]; readonly reward: number }[];
}

export interface TraceItem {
  readonly trace_id: string;
  readonly episode: number;
  readonly action: string;
  readonly status: 'pending' | 'resolved' | 'failed';
  readonly dispatched_at: number;
  readonly settled_at?: number;
  readonly duration_ms?: number;
  readonly attempts?: number;
  readonly step?: number;
  readonly error?: { readonly code: string; readonly message: string };
  readonly rewards?: readonly { readonly source: string; readonly status: RewardStatusName; readonly value?: number }[];
}

export interface TracePage {
  /** Traces that match the filters. */
  readonly total: number;
  readonly offset: number;
  readonly rows: readonly TraceItem[];
  /** Every tool seen, for the filter. */
  readonly tools: readonly string[];
}

export interface EpisodeItem {
  readonly episode: number;
  readonly instance_id: string;
  readonly started_at: number;
  readonly finished_at?: number;
  readonly steps?: number;
  /** Its return: its steps' rewards, delayed values that landed included (what `agent export` and the summary count). */
  readonly reward?: number;
  /** Delayed values it still awaits. */
  readonly pending_rewards?: number;
  readonly reason?: string;
  readonly events: number;
}

export interface EpisodePage {
  readonly total: number;
  readonly offset: number;
  readonly rows: readonly EpisodeItem[];
}

export interface TimelineTrace {
  readonly trace_id: string;
  readonly action: string;
  readonly status: 'pending' | 'resolved' | 'failed';
  readonly step?: number;
  readonly dispatched_at: number;
  /** When the tool started (after the bulkhead queue), if it did. */
  readonly started_at?: number;
  readonly tool_finished_at?: number;
  readonly settled_at?: number;
  readonly duration_ms?: number;
  readonly attempts?: number;
  /** The seq the step committed. */
  readonly seq?: number;
  readonly error?: { readonly code: string; readonly message: string };
}

export interface TimelineReward {
  readonly trace_id: string;
  readonly step: number;
  readonly source: string;
  /** `arrived`, `late`, `imputed` (a fallback), `failed`. */
  readonly kind: 'arrived' | 'late' | 'imputed' | 'failed';
  readonly time: number;
  readonly value?: number;
  readonly delay_ms?: number;
}

export interface EpisodeTimeline {
  readonly episode: number;
  readonly instance_id: string;
  readonly started_at: number;
  readonly finished_at?: number;
  readonly traces: readonly TimelineTrace[];
  readonly commits: readonly { readonly seq: number; readonly time: number; readonly trace_id?: string }[];
  readonly rewards: readonly TimelineReward[];
  /** Token mode: each generated turn (the step it chose first), its ids as the server saw and produced them. */
  readonly turns: readonly TimelineTurn[];
}

/** A generated turn of token mode, for the console: the ids the environment added before it (masked), and the generated ones with their text and logprobs. */
export interface TimelineTurn {
  /** The step it chose (its first tool call's), or the step being chosen when it chose none. */
  readonly step: number;
  readonly time: number;
  readonly prompt_length: number;
  readonly env_ids: readonly number[];
  readonly token_ids: readonly number[];
  readonly token_strs?: readonly string[];
  readonly logprobs: readonly number[];
  readonly text: string;
  readonly finish_reason: string;
  readonly invalid?: string;
  readonly drift?: { readonly at: number; readonly message: string };
}

export interface HistoryAnswer {
  readonly episode: number;
  readonly instance_id: string;
  readonly initial: JsonValue;
  /** In seq order: replaying them over `initial` gives the state at every seq. */
  readonly commits: readonly { readonly seq: number; readonly time: number; readonly trace_id?: string; readonly patch: JsonValue }[];
}

export interface RewardSourceFlow {
  readonly source: string;
  readonly counts: RewardCounts;
  readonly on_time: number | null;
  /** Arrival delays (step → value) in buckets up to `le_ms` (the last has no bound): how many arrived, and how many of those after their deadline. */
  readonly delays: readonly { readonly le_ms: number | null; readonly count: number; readonly late: number }[];
  /** The values still awaited, soonest deadline first (at most 200). */
  readonly pending: readonly { readonly trace_id: string; readonly episode: number; readonly step: number; readonly deadline_at?: number }[];
  /** Values that came after their deadline, or never came (failed, imputed): the newest 200. */
  readonly missed: readonly { readonly trace_id: string; readonly episode: number; readonly step: number; readonly status: RewardStatusName; readonly value?: number; readonly late_value?: number; readonly delay_ms?: number; readonly reason?: string }[];
}

export interface RewardFlow {
  readonly sources: readonly RewardSourceFlow[];
  /** The time deadlines count down to: the clock for a live run, the last event for a finished one. */
  readonly now: number;
  readonly live: boolean;
}

export interface ViolationItem {
  readonly time: number;
  readonly kind: 'params' | 'result' | 'patch' | 'reward';
  readonly code: string;
  readonly episode?: number;
  readonly trace_id?: string;
  readonly action?: string;
  readonly pointer: string;
  readonly message: string;
  readonly value?: JsonValue;
}

export interface ViolationPage {
  readonly total: number;
  readonly offset: number;
  readonly rows: readonly ViolationItem[];
}

/** One line of GET /api/updates (JSON lines): sent when the index moved, at most ten times a second. */
export type Update = FeedState;

/**
 * Live statistics of a run, folded from its events. Reporters (the ink view, plain lines) read
 * `snapshot()`, which is plain data; the summary written at the end comes from the same fold.
 */
import type { EnvEventOf, ErrorInfo } from '../events/env-events.js';
import { oneLine } from '../shared/errors.js';
import type { EpisodeEndReason, RunEvent, WorkerRow } from '../events/run-events.js';
import type { SlaCounts } from '../reward/ledger.js';

/** A call in flight, as the live view shows it: trace id, tool and when it started. */
export interface PendingCall {
  readonly trace_id: string;
  readonly tool: string;
  readonly started_at: number;
}

/** Per tool in a live run: calls, failures, total time, and errors by code. */
export interface ToolStats {
  calls: number;
  failed: number;
  total_ms: number;
  errors: Record<string, number>;
}

/** A live run's statistics: episodes and steps done, calls in flight, rewards recent and pending, per-tool figures. */
export interface RunProgress {
  readonly started_at: number;
  readonly now: number;
  readonly episodes_total: number;
  readonly episodes_done: number;
  readonly episodes_by_reason: Readonly<Partial<Record<EpisodeEndReason, number>>>;
  readonly steps: number;
  readonly failed_steps: number;
  /** Over the whole run. */
  readonly steps_per_second: number;
  /** Oldest first. */
  readonly pending: readonly PendingCall[];
  readonly tools: Readonly<Record<string, Readonly<ToolStats>>>;
  /** Newest last. */
  readonly recent_rewards: readonly RecentReward[];
  /** Values that arrived per source (tool-reported and delayed, late ones included), and their sum. */
  readonly rewards_by_source: Readonly<Record<string, { readonly arrived: number; readonly sum: number }>>;
  /** Delayed sources by status, from the ledger (set by the run). */
  readonly reward_flow?: Readonly<Record<string, SlaCounts>>;
  readonly episode_rewards: { readonly count: number; readonly sum: number; readonly min: number; readonly max: number };
  readonly loop_blocked: readonly { readonly tool: string; readonly blocked_ms: number }[];
  /** Failed steps by error code, over every tool. */
  readonly errors: Readonly<Record<string, number>>;
  /** The first failed step's error on one line, for a run's closing verdict. */
  readonly first_error?: string;
  readonly first_policy_error?: string;
  /** Set while the state store is unreachable: since when (epoch ms), and where. */
  readonly store_down?: { readonly since: number; readonly store: string };
  /** A distributed run: its live workers, and since when there have been none (epoch ms). */
  readonly workers?: { readonly queue: string; readonly alive: readonly WorkerRow[]; readonly none_since?: number };
  /** The policy's model calls, once it made one: how many, how many failed, and the token sequences their episodes fell into. */
  readonly model_turns?: ModelTurns;
}

/** A run's policy model calls (an llm: policy's, an agent program's captured ones). */
export interface ModelTurns {
  readonly total: number;
  readonly failed: number;
  /** Token sequences over every episode with turns: one each, more where an agent program's history was not one sequence. */
  readonly segments: number;
  /** Episodes whose turns fell into more than one sequence. */
  readonly segmented_episodes: number;
}

/** A reward that arrived lately, for the live view: its source, value, trace and status (arrived, late, imputed). */
export interface RecentReward {
  readonly source: string;
  readonly value: number;
  readonly trace_id: string;
  readonly status: 'arrived' | 'late' | 'imputed';
}

const RECENT = 8;

export class RunStats {
  readonly #clock: () => number;
  #startedAt: number;
  #episodesTotal = 0;
  #episodesDone = 0;
  readonly #byReason: Partial<Record<EpisodeEndReason, number>> = {};
  #steps = 0;
  #failedSteps = 0;
  readonly #pending = new Map<string, PendingCall>();
  readonly #tools: Record<string, ToolStats> = {};
  readonly #recent: RecentReward[] = [];
  readonly #bySource: Record<string, { arrived: number; sum: number }> = {};
  readonly #episodeRewards = { count: 0, sum: 0, min: Infinity, max: -Infinity };
  readonly #blocked: { tool: string; blocked_ms: number }[] = [];
  readonly #errors: Record<string, number> = {};
  #firstError: string | undefined;
  #firstPolicyError: string | undefined;
  #storeDown: { since: number; store: string } | undefined;
  #workers: RunProgress['workers'];
  readonly #workersSeen = new Set<string>();
  readonly #turns = { total: 0, failed: 0 };
  /** Episodes with turns, and the sequences each has past its first (only those with more). */
  readonly #turnEpisodes = new Set<number>();
  readonly #extraSegments = new Map<number, number>();

  constructor(clock: () => number) {
    this.#clock = clock;
    this.#startedAt = clock();
  }

  apply(e: RunEvent): void {
    switch (e.type) {
      case 'run_started':
        this.#startedAt = e.started_at ?? e.time;
        this.#episodesTotal = e.config.episodes;
        break;
      case 'dispatched':
        this.#pending.set(e.trace_id, { trace_id: e.trace_id, tool: e.action, started_at: e.time });
        break;
      case 'tool_finished':
        this.#tool(e.tool, e);
        break;
      case 'trace_settled':
        this.#pending.delete(e.trace_id);
        this.#steps++;
        // Failures are counted per step, not per tool answer: a tool that answered but whose patch
        // broke the state schema (STATE_INVALID) or its contract failed all the same.
        if (e.status === 'failed') this.#failed(e.action, e.error);
        break;
      case 'reward_arrived':
      case 'reward_late': {
        const s = (this.#bySource[e.source] ??= { arrived: 0, sum: 0 });
        s.arrived++;
        s.sum += e.value;
        this.#recentReward({ source: e.source, value: e.value, trace_id: e.trace_id, status: e.type === 'reward_late' ? 'late' : 'arrived' });
        break;
      }
      case 'reward_imputed':
        this.#recentReward({ source: e.source, value: e.value, trace_id: e.trace_id, status: 'imputed' });
        break;
      case 'store_unavailable':
        this.#storeDown = { since: e.since, store: e.store };
        break;
      case 'store_recovered':
        this.#storeDown = undefined;
        break;
      case 'workers': {
        for (const w of e.workers) this.#workersSeen.add(w.id);
        const noneSince = e.workers.length > 0 ? undefined : (this.#workers?.none_since ?? e.time);
        this.#workers = { queue: e.queue, alive: e.workers, ...(noneSince !== undefined ? { none_since: noneSince } : {}) };
        break;
      }
      case 'llm_call': {
        if (e.role !== 'policy') break;
        this.#turns.total++;
        if (e.error !== undefined) this.#turns.failed++;
        if (e.episode === undefined) break;
        this.#turnEpisodes.add(e.episode);
        const segment = e.tokens?.segment ?? 0;
        if (segment > (this.#extraSegments.get(e.episode) ?? 0)) this.#extraSegments.set(e.episode, segment);
        break;
      }
      case 'loop_blocked':
        this.#blocked.push({ tool: e.tool, blocked_ms: e.blocked_ms });
        break;
      case 'episode_finished': {
        this.#episodesDone++;
        this.#byReason[e.reason] = (this.#byReason[e.reason] ?? 0) + 1;
        if (e.reason === 'policy_error' && e.error) this.#firstPolicyError ??= oneLine(e.error.message);
        // An interrupted episode was cut short: its reward says nothing about the policy.
        if (e.reason === 'interrupted') break;
        const r = this.#episodeRewards;
        r.count++;
        r.sum += e.reward;
        r.min = Math.min(r.min, e.reward);
        r.max = Math.max(r.max, e.reward);
        break;
      }
      default:
        break;
    }
  }

  #recentReward(r: RecentReward): void {
    this.#recent.push(r);
    if (this.#recent.length > RECENT) this.#recent.shift();
  }

  #tool(name: string, e: EnvEventOf<'tool_finished'>): void {
    const t = (this.#tools[name] ??= { calls: 0, failed: 0, total_ms: 0, errors: {} });
    t.calls++;
    t.total_ms += e.duration_ms;
  }

  #failed(tool: string, error: ErrorInfo | undefined): void {
    const t = (this.#tools[tool] ??= { calls: 0, failed: 0, total_ms: 0, errors: {} });
    const code = error?.code ?? 'UNKNOWN';
    t.failed++;
    t.errors[code] = (t.errors[code] ?? 0) + 1;
    this.#failedSteps++;
    this.#errors[code] = (this.#errors[code] ?? 0) + 1;
    if (error && code !== 'TOOL_CANCELLED') this.#firstError ??= oneLine(error.message);
  }

  snapshot(): RunProgress {
    const now = this.#clock();
    const elapsed = Math.max(1, now - this.#startedAt) / 1000;
    const r = this.#episodeRewards;
    return {
      started_at: this.#startedAt,
      now,
      episodes_total: this.#episodesTotal,
      episodes_done: this.#episodesDone,
      episodes_by_reason: { ...this.#byReason },
      steps: this.#steps,
      failed_steps: this.#failedSteps,
      steps_per_second: this.#steps / elapsed,
      pending: [...this.#pending.values()],
      tools: structuredClone(this.#tools),
      recent_rewards: [...this.#recent],
      rewards_by_source: structuredClone(this.#bySource),
      episode_rewards: r.count === 0 ? { count: 0, sum: 0, min: 0, max: 0 } : { ...r },
      loop_blocked: [...this.#blocked],
      errors: { ...this.#errors },
      ...(this.#firstError !== undefined ? { first_error: this.#firstError } : {}),
      ...(this.#firstPolicyError !== undefined ? { first_policy_error: this.#firstPolicyError } : {}),
      ...(this.#storeDown ? { store_down: { ...this.#storeDown } } : {}),
      ...(this.#workers ? { workers: this.#workers } : {}),
      ...(this.#turns.total > 0 ? { model_turns: this.#modelTurns() } : {}),
    };
  }

  #modelTurns(): ModelTurns {
    const extra = [...this.#extraSegments.values()].reduce((a, b) => a + b, 0);
    return { ...this.#turns, segments: this.#turnEpisodes.size + extra, segmented_episodes: this.#extraSegments.size };
  }

  /** Every worker a distributed run has seen alive. */
  workersSeen(): ReadonlySet<string> {
    return this.#workersSeen;
  }
}

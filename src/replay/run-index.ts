/**
 * What the debug console shows, kept up to date event by event: every trace (pending ones in
 * dispatch order, so oldest first), each episode with references to its events, each (step,
 * source) reward, and every schema violation. The index holds no patches, observations or
 * params: an episode's events are read back through their references when a pane needs them, so
 * a run of a million events fits in memory and opens fast. Fed by a run folder (references are
 * byte offsets) or by a live run's event stream (references are the events themselves).
 */
import type { ErrorInfo, RewardStatus } from '../events/env-events.js';
import type { JsonValue } from '../shared/json.js';
import { cleanSum } from '../shared/float-sum.js';

/** An event as the index sees it: a record with a type and a time (epoch ms). */
export type IndexedEvent = Readonly<Record<string, unknown>> & { readonly type: string; readonly time: number };

export interface TraceRow {
  readonly traceId: string;
  readonly episode: number;
  readonly action: string;
  readonly status: 'pending' | 'resolved' | 'failed';
  readonly dispatchedAt: number;
  readonly settledAt?: number;
  /** Dispatch to settle. */
  readonly durationMs?: number;
  readonly attempts?: number;
  readonly step?: number;
  readonly error?: ErrorInfo;
  /** Each reward source's value for this step (a handful at most: a list beats a map). */
  readonly rewards?: readonly RewardRow[];
  /** The step's reward once settled, delayed values in as they land (a failed step: 0). */
  readonly reward?: number;
}

export interface EpisodeRow<Ref> {
  readonly episode: number;
  readonly instanceId: string;
  readonly initialStateId: string;
  readonly startedAt: number;
  readonly finishedAt?: number;
  readonly steps?: number;
  readonly reward?: number;
  readonly reason?: string;
  /** The episode's events, in order, as the source can read them back. */
  readonly refs: readonly Ref[];
}

/** One source's value for one step, and where it stands. */
export interface RewardRow {
  readonly traceId: string;
  readonly episode: number;
  readonly step: number;
  readonly source: string;
  readonly status: RewardStatus;
  readonly value?: number;
  /** From the step to the value's arrival. */
  readonly delayMs?: number;
  readonly deadlineAt?: number;
  /** A value that arrived after the deadline (status `late`). */
  readonly lateValue?: number;
  readonly reason?: string;
}

/** What a violation broke: an action's params, a tool's result, a patch (the state schema), a reward. */
export type ViolationKind = 'params' | 'result' | 'patch' | 'reward';

export interface ViolationRow {
  readonly time: number;
  readonly kind: ViolationKind;
  readonly code: string;
  readonly episode?: number;
  readonly traceId?: string;
  readonly action?: string;
  /** JSON pointer into the document that broke its schema ('' = the whole document). */
  readonly pointer: string;
  readonly message: string;
  /** The offending value, when the error carried it. */
  readonly value?: JsonValue;
}

export interface RunHeader {
  readonly runId: string;
  readonly env: string;
  readonly policy: string;
  readonly episodes: number;
  readonly startedAt: number;
  readonly port?: number;
  readonly status: 'running' | 'completed' | 'interrupted';
  /** When the run finished (its `run_finished` event). */
  readonly finishedAt?: number;
}

const VIOLATION_KINDS: Readonly<Record<string, ViolationKind>> = {
  PARAMS_INVALID: 'params',
  STATE_INVALID: 'patch',
  TOOL_CONTRACT: 'result',
  TOOL_MALFORMED_OUTPUT: 'result',
  REWARD_INVALID: 'reward',
};

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** The fields of a reward event the index reads beyond its step and source. */
export interface RewardFields {
  readonly [field: string]: unknown;
  readonly value?: unknown;
  readonly delay_ms?: unknown;
  readonly deadline_at?: unknown;
  readonly reason?: unknown;
}

export class RunIndex<Ref> {
  run: RunHeader | undefined;
  /** Every trace, in dispatch order. */
  readonly traces: readonly TraceRow[] = [];
  /** The traces still in flight, in dispatch order: oldest first. */
  readonly pending = new Map<string, TraceRow>();
  /** The settled traces, in settle order (a view pages through it without copying). */
  readonly settled: TraceRow[] = [];
  failedTraces = 0;
  /** Per reward source, how many of its values stand in each status. */
  readonly rewardCounts = new Map<string, Record<RewardStatus, number>>();
  readonly episodes = new Map<number, EpisodeRow<Ref>>();
  /** Per episode: the sum of its settled steps' rewards (each trace row keeps its own, delayed values in as they land) and the values still pending. */
  readonly #returns = new Map<number, { sum: number; settled: number; pending: number }>();
  /** Every (step, source) value, in the order first seen; also reachable from its trace. */
  readonly rewards: RewardRow[] = [];
  /** Reward events of the event log that the run also wrote to its reward log. */
  loggedRewards = 0;
  readonly violations: ViolationRow[] = [];
  /** Events indexed so far. */
  events = 0;
  /** The latest event time: "now" for a finished run, so ages freeze where the run stopped. */
  lastTime = 0;
  /** Bumped on every change, so a view redraws only when there is something new. */
  version = 0;
  /** Which episode an instance is running now (instances are reused across episodes). */
  readonly #current = new Map<string, number>();
  /**
   * Traces by id, filled up to `#mapped` rows on the first lookup after new ones: a replay of a
   * run's index refers to traces by position and never pays for 100,000s of inserts it would not use.
   */
  readonly #byId = new Map<string, TraceRow>();
  #mapped = 0;

  /** A trace by its id. */
  trace(traceId: string): TraceRow | undefined {
    const rows = this.traces;
    for (; this.#mapped < rows.length; this.#mapped++) {
      const row = rows[this.#mapped] as TraceRow;
      this.#byId.set(row.traceId, row);
    }
    return this.#byId.get(traceId);
  }

  /** The episode an event belongs to, if any: its own field, else its trace's, else its instance's. */
  episodeOf(e: Readonly<Record<string, unknown>>): number | undefined {
    const { episode, trace_id: traceId, instance_id: instanceId } = e;
    if (typeof episode === 'number') return episode;
    if (typeof traceId === 'string') {
      const t = this.trace(traceId);
      if (t) return t.episode;
    }
    return typeof instanceId === 'string' ? this.#current.get(instanceId) : undefined;
  }

  /** An event whose details the index does not need: it only counts, and joins its episode's events. */
  reference(e: IndexedEvent, ref: Ref): void {
    this.referenceTo(this.episodeOf(e), e.time, ref);
  }

  /** An event counted and joined to an episode already known (the index file attributes its events when written). */
  referenceTo(episode: number | undefined, time: number, ref: Ref): void {
    this.#tick(time);
    if (episode !== undefined) (this.episodes.get(episode)?.refs as Ref[] | undefined)?.push(ref);
  }

  ingest(e: IndexedEvent, ref: Ref): void {
    switch (e.type) {
      case 'run_started': {
        const config = (e['config'] ?? {}) as Record<string, unknown>;
        this.run = {
          runId: String(e['run_id']),
          env: String(config['env'] ?? ''),
          policy: String(config['policy'] ?? ''),
          episodes: Number(config['episodes'] ?? 0),
          startedAt: typeof e['started_at'] === 'number' ? e['started_at'] : e.time,
          ...(typeof e['port'] === 'number' ? { port: e['port'] } : {}),
          status: 'running',
        };
        break;
      }
      case 'run_finished':
        if (this.run) this.run = { ...this.run, status: e['status'] === 'completed' ? 'completed' : 'interrupted', finishedAt: e.time };
        break;
      case 'episode_started':
        this.episodeStarted(e['episode'] as number, e['instance_id'] as string, e['initial_state_id'] as string, e.time);
        break;
      case 'episode_finished': {
        const error = e['error'] as ErrorInfo | undefined;
        if (this.episodeFinished(e['episode'] as number, e.time, e['steps'] as number, e['reward'] as number, e['reason'] as string) && error) this.#violation(e, error);
        break;
      }
      case 'dispatched':
        this.dispatched(e['trace_id'] as string, e['episode'] as number, e['action'] as string, e.time);
        break;
      case 'tool_finished':
        this.toolFinished(this.trace(e['trace_id'] as string), e['attempts'] as number);
        break;
      case 'error': {
        const error = e['error'] as ErrorInfo;
        const row = typeof e['trace_id'] === 'string' ? this.trace(e['trace_id']) : undefined;
        if (row) (row as Mutable<TraceRow>).error = error;
        this.#violation(e, error, row);
        break;
      }
      case 'trace_settled': {
        const trace = this.trace(e['trace_id'] as string);
        if (!this.settle(trace, e.time, e['status'] as string, e['step'] as number, e['duration_ms'] as number | undefined, e['error'] as ErrorInfo | undefined, typeof e['reward'] === 'number' ? e['reward'] : undefined)) break;
        const rewards = (e['rewards'] ?? {}) as Record<string, { status: RewardStatus; value: number | null; delay_ms: number | null; deadline_at?: number }>;
        for (const source in rewards) {
          const r = rewards[source] as (typeof rewards)[string];
          this.settledReward(trace as TraceRow, source, r.status, r.value, r.delay_ms, r.deadline_at);
        }
        break;
      }
      case 'reward_expected':
      case 'reward_arrived':
      case 'reward_late':
      case 'reward_imputed':
      case 'reward_failed':
        this.reward(e.type, e['trace_id'] as string, e['episode'] as number, e['step'] as number, e['source'] as string, e, e['key'] as string | undefined);
        break;
      default:
        break;
    }
    this.reference(e, ref);
  }

  #tick(time: number): void {
    this.events++;
    this.version++;
    if (time > this.lastTime) this.lastTime = time;
  }

  /**
   * The typed steps below are what `ingest` does per event type; the run's index file (see
   * run-index-file.ts) calls them directly, without building an event object per record.
   */

  episodeStarted(episode: number, instanceId: string, initialStateId: string, time: number): void {
    this.#current.set(instanceId, episode);
    const known = this.episodes.get(episode);
    // A resumed run starts an unfinished episode again: its earlier events stay with it.
    this.episodes.set(episode, { episode, instanceId, initialStateId, startedAt: known?.startedAt ?? time, refs: known ? (known.refs as Ref[]) : [] });
  }

  /** False when the episode never started here (its start is in no event read). */
  episodeFinished(episode: number, time: number, steps: number, reward: number, reason: string): boolean {
    const row = this.episodes.get(episode) as Mutable<EpisodeRow<Ref>> | undefined;
    if (!row) return false;
    row.finishedAt = time;
    row.steps = steps;
    row.reward = reward;
    row.reason = reason;
    return true;
  }

  /** A trace dispatched: a new pending row, last in dispatch order. */
  dispatched(traceId: string, episode: number, action: string, time: number): TraceRow {
    const again = this.pending.get(traceId) as Mutable<TraceRow> | undefined;
    if (again) {
      // A call a crash cut off, dispatched again by the resumed run under its id: the same row.
      again.episode = episode;
      again.action = action;
      again.dispatchedAt = time;
      again.attempts = again.error = again.rewards = undefined;
      return again;
    }
    // Every field from the start (undefined until known): a row keeps one shape and all in one object.
    const row: TraceRow = { traceId, episode, action, status: 'pending', dispatchedAt: time, settledAt: undefined, durationMs: undefined, attempts: undefined, step: undefined, error: undefined, rewards: undefined, reward: undefined };
    (this.traces as TraceRow[]).push(row);
    this.pending.set(traceId, row);
    return row;
  }

  toolFinished(trace: TraceRow | undefined, attempts: number): void {
    if (trace) (trace as Mutable<TraceRow>).attempts = attempts;
  }

  /** A pending trace settles; false (and nothing changes) when it is unknown or settled already. */
  settle(row: TraceRow | undefined, time: number, status: string, step: number, durationMs: number | undefined, error: ErrorInfo | undefined, reward?: number): boolean {
    const trace = row as Mutable<TraceRow> | undefined;
    if (!trace || !this.pending.delete(trace.traceId)) return false;
    this.settled.push(trace);
    if (reward !== undefined) this.#stepReward(trace, status === 'resolved' ? reward : 0);
    trace.status = status === 'resolved' ? 'resolved' : 'failed';
    if (trace.status === 'failed') this.failedTraces++;
    trace.settledAt = time;
    trace.durationMs = typeof durationMs === 'number' ? durationMs : time - trace.dispatchedAt;
    trace.step = step;
    if (error && !trace.error) trace.error = error;
    return true;
  }

  /** One source's entry in a settled step's `rewards`. */
  settledReward(trace: TraceRow, source: string, status: RewardStatus, value: number | null, delayMs: number | null, deadlineAt: number | undefined): void {
    const row = this.#rewardRow(trace.traceId, trace.episode, trace.step as number, source, trace);
    // An immediate source arrived before its step settled (its own event came first): that stands.
    if (row.status === 'pending') {
      this.#setStatus(row, status);
      if (value !== null) row.value = value;
      if (delayMs !== null) row.delayMs = delayMs;
    }
    if (deadlineAt !== undefined) row.deadlineAt = deadlineAt;
  }

  #rewardRow(traceId: string, episode: number, step: number, source: string, trace = this.trace(traceId) as Mutable<TraceRow> | undefined): Mutable<RewardRow> {
    const rows = trace?.rewards as Mutable<RewardRow>[] | undefined;
    if (rows) for (let i = 0; i < rows.length; i++) if ((rows[i] as RewardRow).source === source) return rows[i] as Mutable<RewardRow>;
    const row: Mutable<RewardRow> = { traceId, episode, step, source, status: 'pending', value: undefined, delayMs: undefined, deadlineAt: undefined, lateValue: undefined, reason: undefined };
    this.rewards.push(row);
    this.#tally(episode).pending++;
    let counts = this.rewardCounts.get(source);
    if (!counts) this.rewardCounts.set(source, (counts = { pending: 0, arrived: 0, fallback: 0, late: 0, failed: 0 }));
    counts.pending++;
    if (trace) {
      // A fresh list of the exact size: a push would grow it to 17 slots (V8's growth), 100+ bytes per trace.
      trace.rewards = rows ? [...rows, row] : [row];
    }
    return row;
  }

  #setStatus(row: Mutable<RewardRow>, status: RewardStatus): void {
    if (row.status === 'pending' && status !== 'pending') this.#tally(row.episode).pending--;
    const counts = this.rewardCounts.get(row.source);
    if (counts) {
      counts[row.status]--;
      counts[status]++;
    }
    row.status = status;
  }

  /**
   * A record of the run's reward log (`rewards.jsonl`) as an event: one from after the run finished
   * (`agent reward` on the folder) lands on its step; any other is in the event log already.
   * True when it landed.
   */
  laterReward(e: IndexedEvent): boolean {
    const end = this.run?.finishedAt;
    if (end === undefined || e.time <= end) return false;
    this.#reward(e.type, e['trace_id'] as string, e['episode'] as number, e['step'] as number, e['source'] as string, e);
    return true;
  }

  /**
   * A reward event (`reward_expected`, `reward_arrived`, `reward_late`, `reward_imputed`,
   * `reward_failed`): its fields `value`, `delay_ms`, `deadline_at` and `reason` read from `fields`.
   * `key` tells a tool's own reward, which the run's reward log does not repeat.
   */
  reward(type: string, traceId: string, episode: number, step: number, source: string, fields: RewardFields, key: string | undefined, trace?: TraceRow): void {
    if (!(type === 'reward_arrived' && key === 'tool')) this.loggedRewards++;
    this.#reward(type, traceId, episode, step, source, fields, trace);
  }

  #reward(type: string, traceId: string, episode: number, step: number, source: string, fields: RewardFields, trace?: TraceRow): void {
    // Looked up once, for its reward row and its step's reward (a replay names it by position: no lookup).
    const known = trace ?? this.trace(traceId);
    const row = this.#rewardRow(traceId, episode, step, source, known as Mutable<TraceRow> | undefined);
    // A value landing carries its step's reward with it in (before the step settled, the settle carries it).
    if (type !== 'reward_expected' && type !== 'reward_failed' && typeof fields.reward === 'number' && known?.reward !== undefined) this.#stepReward(known, fields.reward);
    switch (type) {
      case 'reward_expected':
        if (typeof fields.deadline_at === 'number') row.deadlineAt = fields.deadline_at;
        break;
      case 'reward_arrived':
        this.#setStatus(row, 'arrived');
        row.value = fields.value as number;
        row.delayMs = fields.delay_ms as number;
        break;
      case 'reward_late':
        this.#setStatus(row, 'late');
        row.lateValue = fields.value as number;
        row.delayMs = fields.delay_ms as number;
        break;
      case 'reward_imputed':
        this.#setStatus(row, 'fallback');
        row.value = fields.value as number;
        row.reason = fields.reason as string;
        break;
      default:
        this.#setStatus(row, 'failed');
        row.reason = fields.reason as string;
    }
  }

  /**
   * An episode's return as far as the run has gone: its steps' rewards, delayed values that landed
   * included (the definition `agent export` and the summary use), and how many are still pending.
   * Undefined for an episode no step of which settled with its reward recorded (an older index).
   */
  episodeReturn(episode: number): { readonly value: number; readonly pending: number } | undefined {
    const t = this.#returns.get(episode);
    return t && t.settled > 0 ? { value: cleanSum(t.sum), pending: t.pending } : undefined;
  }

  #stepReward(trace: TraceRow, reward: number): void {
    const t = this.#tally(trace.episode);
    if (trace.reward === undefined) t.settled++;
    t.sum += reward - (trace.reward ?? 0);
    (trace as Mutable<TraceRow>).reward = reward;
  }

  #tally(episode: number): { sum: number; settled: number; pending: number } {
    let t = this.#returns.get(episode);
    if (!t) this.#returns.set(episode, (t = { sum: 0, settled: 0, pending: 0 }));
    return t;
  }

  #violation(e: IndexedEvent, error: ErrorInfo, trace?: TraceRow): void {
    const kind = VIOLATION_KINDS[error.code];
    if (!kind) return;
    const episode = this.episodeOf(e);
    const base = {
      time: e.time,
      kind,
      code: error.code,
      ...(episode !== undefined ? { episode } : {}),
      ...(trace ? { traceId: trace.traceId, action: trace.action } : {}),
    };
    const issues = error.issues ?? [];
    if (issues.length === 0) this.violations.push({ ...base, pointer: '', message: error.message.split('\n')[0] ?? '' });
    for (const issue of issues) this.violations.push({ ...base, pointer: issue.pointer, message: issue.message, ...(issue.value !== undefined ? { value: issue.value } : {}) });
  }
}

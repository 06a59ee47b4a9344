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

export class RunIndex<Ref> {
  run: RunHeader | undefined;
  /** Every trace, in dispatch order. */
  readonly traces = new Map<string, TraceRow>();
  /** The traces still in flight, in dispatch order: oldest first. */
  readonly pending = new Map<string, TraceRow>();
  /** The settled traces, in settle order (a view pages through it without copying). */
  readonly settled: TraceRow[] = [];
  failedTraces = 0;
  /** Per reward source, how many of its values stand in each status. */
  readonly rewardCounts = new Map<string, Record<RewardStatus, number>>();
  readonly episodes = new Map<number, EpisodeRow<Ref>>();
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

  /** The episode an event belongs to, if any: its own field, else its trace's, else its instance's. */
  episodeOf(e: Readonly<Record<string, unknown>>): number | undefined {
    const { episode, trace_id: traceId, instance_id: instanceId } = e;
    if (typeof episode === 'number') return episode;
    if (typeof traceId === 'string') {
      const t = this.traces.get(traceId);
      if (t) return t.episode;
    }
    return typeof instanceId === 'string' ? this.#current.get(instanceId) : undefined;
  }

  /** An event whose details the index does not need: it only counts, and joins its episode's events. */
  reference(e: IndexedEvent, ref: Ref): void {
    this.#tick(e.time);
    const ep = this.episodeOf(e);
    if (ep !== undefined) (this.episodes.get(ep)?.refs as Ref[] | undefined)?.push(ref);
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
      case 'episode_started': {
        const episode = e['episode'] as number;
        const instanceId = e['instance_id'] as string;
        this.#current.set(instanceId, episode);
        const known = this.episodes.get(episode);
        // A resumed run starts an unfinished episode again: its earlier events stay with it.
        this.episodes.set(episode, { episode, instanceId, initialStateId: e['initial_state_id'] as string, startedAt: known?.startedAt ?? e.time, refs: known ? (known.refs as Ref[]) : [] });
        break;
      }
      case 'episode_finished': {
        const row = this.episodes.get(e['episode'] as number);
        if (row) {
          Object.assign(row as Mutable<EpisodeRow<Ref>>, { finishedAt: e.time, steps: e['steps'] as number, reward: e['reward'] as number, reason: e['reason'] as string });
          const error = e['error'] as ErrorInfo | undefined;
          if (error) this.#violation(e, error);
        }
        break;
      }
      case 'dispatched': {
        const row: TraceRow = { traceId: e['trace_id'] as string, episode: e['episode'] as number, action: e['action'] as string, status: 'pending', dispatchedAt: e.time };
        this.traces.set(row.traceId, row);
        this.pending.set(row.traceId, row);
        break;
      }
      case 'tool_finished': {
        const row = this.traces.get(e['trace_id'] as string);
        if (row) (row as Mutable<TraceRow>).attempts = e['attempts'] as number;
        break;
      }
      case 'error': {
        const error = e['error'] as ErrorInfo;
        const row = typeof e['trace_id'] === 'string' ? this.traces.get(e['trace_id']) : undefined;
        if (row) (row as Mutable<TraceRow>).error = error;
        this.#violation(e, error, row);
        break;
      }
      case 'trace_settled':
        this.#settled(e);
        break;
      case 'reward_expected':
      case 'reward_arrived':
      case 'reward_late':
      case 'reward_imputed':
      case 'reward_failed':
        // What the run writer also logged to rewards.jsonl (a tool's own reward is not logged there).
        if (!(e.type === 'reward_arrived' && e['key'] === 'tool')) this.loggedRewards++;
        this.#reward(e);
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

  #settled(e: IndexedEvent): void {
    const traceId = e['trace_id'] as string;
    const trace = this.traces.get(traceId) as Mutable<TraceRow> | undefined;
    if (!trace) return;
    if (!this.pending.delete(traceId)) return;
    this.settled.push(trace);
    trace.status = e['status'] === 'resolved' ? 'resolved' : 'failed';
    if (trace.status === 'failed') this.failedTraces++;
    trace.settledAt = e.time;
    trace.durationMs = typeof e['duration_ms'] === 'number' ? e['duration_ms'] : e.time - trace.dispatchedAt;
    trace.step = e['step'] as number;
    if (e['error'] && !trace.error) trace.error = e['error'] as ErrorInfo;
    const rewards = (e['rewards'] ?? {}) as Record<string, { status: RewardStatus; value: number | null; delay_ms: number | null; deadline_at?: number }>;
    for (const source in rewards) {
      const r = rewards[source] as (typeof rewards)[string];
      const row = this.#rewardRow(traceId, trace.episode, trace.step, source, trace);
      // An immediate source arrived before its step settled (its own event came first): that stands.
      if (row.status === 'pending') {
        this.#setStatus(row, r.status);
        if (r.value !== null) row.value = r.value;
        if (r.delay_ms !== null) row.delayMs = r.delay_ms;
      }
      if (r.deadline_at !== undefined) row.deadlineAt = r.deadline_at;
    }
  }

  #rewardRow(traceId: string, episode: number, step: number, source: string, trace = this.traces.get(traceId) as Mutable<TraceRow> | undefined): Mutable<RewardRow> {
    const rows = (trace?.rewards ?? []) as Mutable<RewardRow>[];
    let row = rows.find((r) => r.source === source);
    if (!row) {
      row = { traceId, episode, step, source, status: 'pending' };
      this.rewards.push(row);
      let counts = this.rewardCounts.get(source);
      if (!counts) this.rewardCounts.set(source, (counts = { pending: 0, arrived: 0, fallback: 0, late: 0, failed: 0 }));
      counts.pending++;
      if (trace) {
        rows.push(row);
        trace.rewards = rows;
      }
    }
    return row;
  }

  #setStatus(row: Mutable<RewardRow>, status: RewardStatus): void {
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
    this.#reward(e);
    return true;
  }

  #reward(e: IndexedEvent): void {
    const row = this.#rewardRow(e['trace_id'] as string, e['episode'] as number, e['step'] as number, e['source'] as string);
    switch (e.type) {
      case 'reward_expected':
        if (typeof e['deadline_at'] === 'number') row.deadlineAt = e['deadline_at'];
        break;
      case 'reward_arrived':
        this.#setStatus(row, 'arrived');
        row.value = e['value'] as number;
        row.delayMs = e['delay_ms'] as number;
        break;
      case 'reward_late':
        this.#setStatus(row, 'late');
        row.lateValue = e['value'] as number;
        row.delayMs = e['delay_ms'] as number;
        break;
      case 'reward_imputed':
        this.#setStatus(row, 'fallback');
        row.value = e['value'] as number;
        row.reason = e['reason'] as string;
        break;
      default:
        this.#setStatus(row, 'failed');
        row.reason = e['reason'] as string;
    }
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

/**
 * The web console's answers, computed from a {@link DebugFeed}: the same index and episode reads
 * the terminal console uses, so the two consoles cannot disagree. Every answer is a bounded page
 * or an aggregate: a million-event run costs the page what it shows, never the whole index.
 * Functions of the feed, and queries (overview, traces, episodes) that keep what they computed between
 * calls, since a live page asks again up to twenty times a second.
 */
import type { DebugFeed } from '../replay/debug-feed.js';
import type { IndexedEvent, RewardRow, TraceRow } from '../replay/run-index.js';
import type { TokenTurn } from '../events/env-events.js';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { matches, parseQuery } from '../shared/query.js';
import { difficultyWeight, type CurriculumFile } from '../replay/curriculum-file.js';
import type {
  BenchmarkDigest,
  CurriculumDigest,
  EpisodeItem,
  EpisodePage,
  EpisodeTimeline,
  FeedState,
  HistoryAnswer,
  Overview,
  RewardCounts,
  RewardFlow,
  RewardSourceFlow,
  TimelineReward,
  TimelineTrace,
  TimelineTurn,
  TraceItem,
  TracePage,
  ViolationPage,
} from './api-types.js';

/** At most this many rows in one page of a list. */
export const MAX_PAGE = 1_000;
/** The throughput chart has at most this many buckets, however long the run. */
const THROUGHPUT_BUCKETS = 120;
/** A live run's steps/s is counted over this window. */
const RATE_WINDOW_MS = 5_000;
/** Arrival-delay buckets (1-2-5 from 1 ms to 1 day): delays of rewards span nine orders of magnitude. */
const DELAY_BOUNDS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000].map((p) => m * p)).filter((b) => b <= 86_400_000).sort((a, b) => a - b);
const LIST_CAP = 200;

/** The smallest of 100 ms, 200 ms, 500 ms, 1 s, 2 s, 5 s … that is at least `ms`. */
function niceBucket(ms: number): number {
  for (let p = 100; ; p *= 10) for (const m of [1, 2, 5]) if (m * p >= ms) return m * p;
}

export function feedState(feed: DebugFeed): FeedState {
  const s = feed.status();
  return { phase: s.phase, ...(s.progress !== undefined ? { progress: s.progress } : {}), ...(s.error !== undefined ? { error: s.error } : {}), version: feed.index.version, events: feed.index.events };
}

const isLive = (feed: DebugFeed): boolean => {
  const phase = feed.status().phase;
  return phase === 'live' || phase === 'reconnecting' || (phase === 'following' && feed.index.run?.status === 'running');
};

/** "Now" for ages and countdowns: the clock while the run goes on, its last event once it is over. */
function nowOf(feed: DebugFeed, clock: () => number): number {
  return isLive(feed) ? Math.max(clock(), feed.index.lastTime) : feed.index.lastTime;
}

function onTime(counts: RewardCounts): number | null {
  const settled = counts.arrived + counts.late + counts.fallback + counts.failed;
  return settled === 0 ? null : counts.arrived / settled;
}

/** The throughput chart's finest bucket: counts are kept at this resolution and summed into the chart's buckets. */
const TICK_MS = 100;

/**
 * The overview, kept up to date incrementally: settled traces are only ever appended to the
 * index, so each call folds in the ones settled since the last (per-100-ms counts, failures by
 * tool and code) instead of walking a million-event run again at every update.
 */
export class OverviewQuery {
  #seen = 0;
  #start: number | undefined;
  readonly #ticks: number[] = [];
  readonly #errors = new Map<string, { tool: string; code: string; count: number }>();

  answer(feed: DebugFeed, files: { readonly benchmark?: BenchmarkDigest | undefined; readonly curriculum?: CurriculumDigest | undefined }, clock: () => number = Date.now): Overview {
    const { benchmark, curriculum } = files;
    const { index } = feed;
    const run = index.run;
    const settled = index.settled;
    if (settled.length < this.#seen) this.#reset();
    const start = (this.#start ??= run?.startedAt ?? settled[0]?.dispatchedAt);
    for (; this.#seen < settled.length; this.#seen++) {
      const t = settled[this.#seen] as TraceRow;
      const tick = Math.max(0, Math.floor(((t.settledAt ?? t.dispatchedAt) - (start ?? 0)) / TICK_MS));
      while (this.#ticks.length <= tick) this.#ticks.push(0);
      this.#ticks[tick] = (this.#ticks[tick] ?? 0) + 1;
      if (t.status === 'failed') {
        const code = t.error?.code ?? 'FAILED';
        const key = `${t.action}\u0000${code}`;
        const row = this.#errors.get(key) ?? { tool: t.action, code, count: 0 };
        row.count++;
        this.#errors.set(key, row);
      }
    }
    const from = start ?? index.lastTime;
    const now = nowOf(feed, clock);
    const span = Math.max(TICK_MS, now - from, this.#ticks.length * TICK_MS);
    const bucketMs = niceBucket(span / THROUGHPUT_BUCKETS);
    const per = bucketMs / TICK_MS;
    const counts = new Array<number>(Math.ceil(span / bucketMs)).fill(0);
    this.#ticks.forEach((c, i) => {
      const b = Math.min(counts.length - 1, Math.floor(i / per));
      counts[b] = (counts[b] ?? 0) + c;
    });
    const live = isLive(feed);
    let recent = 0;
    for (let i = Math.max(0, Math.floor((now - from - RATE_WINDOW_MS) / TICK_MS)); i < this.#ticks.length; i++) recent += this.#ticks[i] ?? 0;
    const elapsed = (run?.finishedAt ?? index.lastTime) - from;
    let finished = 0;
    for (const e of index.episodes.values()) if (e.finishedAt !== undefined) finished++;
    return {
      title: feed.title,
      feed: feedState(feed),
      ...(run ? { run: { run_id: run.runId, env: run.env, policy: run.policy, episodes: run.episodes, started_at: run.startedAt, ...(run.finishedAt !== undefined ? { finished_at: run.finishedAt } : {}), status: run.status } } : {}),
      traces: { total: index.traces.length, pending: index.pending.size, settled: settled.length, failed: index.failedTraces },
      episodes: { seen: index.episodes.size, finished },
      steps_per_s: settled.length === 0 ? null : live ? recent / (RATE_WINDOW_MS / 1_000) : elapsed > 0 ? settled.length / (elapsed / 1_000) : null,
      throughput: { bucket_ms: bucketMs, start: from, counts },
      errors_by_tool: [...this.#errors.values()].map((e) => ({ ...e })).sort((a, b) => b.count - a.count),
      rewards: [...index.rewardCounts].map(([source, c]) => ({ source, counts: { ...c }, on_time: onTime(c) })),
      violations: index.violations.length,
      last_time: index.lastTime,
      ...(benchmark ? { benchmark } : {}),
      ...(curriculum ? { curriculum } : {}),
    };
  }

  #reset(): void {
    this.#seen = 0;
    this.#start = undefined;
    this.#ticks.length = 0;
    this.#errors.clear();
  }
}

export interface TraceFilter {
  readonly q?: string;
  readonly status?: string;
  readonly tool?: string;
  readonly episode?: number;
  readonly order?: 'asc' | 'desc';
}

function traceItem(t: TraceRow): TraceItem {
  return {
    trace_id: t.traceId,
    episode: t.episode,
    action: t.action,
    status: t.status,
    dispatched_at: t.dispatchedAt,
    ...(t.settledAt !== undefined ? { settled_at: t.settledAt } : {}),
    ...(t.durationMs !== undefined ? { duration_ms: t.durationMs } : {}),
    ...(t.attempts !== undefined ? { attempts: t.attempts } : {}),
    ...(t.step !== undefined ? { step: t.step } : {}),
    ...(t.error ? { error: { code: t.error.code, message: t.error.message.split('\n')[0] ?? '' } } : {}),
    ...(t.rewards ? { rewards: t.rewards.map((r) => ({ source: r.source, status: r.status, ...(r.value !== undefined ? { value: r.value } : {}) })) } : {}),
  };
}

/**
 * Pages of every trace in dispatch order (or newest first), filtered by status, tool, episode and
 * the terminal console's search (`tool:x status:failed` terms and free words). The filtered list
 * is kept between calls while the index has not moved, so scrolling a filter costs a slice.
 */
export class TraceQuery {
  #all: readonly TraceRow[] = [];
  #version = -1;
  #cached: { key: string; version: number; rows: readonly TraceRow[] } | undefined;
  #tools: readonly string[] = [];

  page(feed: DebugFeed, filter: TraceFilter, offset: number, limit: number): TracePage {
    const { index } = feed;
    // Re-read once per version, not per request.
    if (this.#version !== index.version) {
      this.#all = index.traces;
      this.#tools = [...new Set(this.#all.map((t) => t.action))].sort();
      this.#version = index.version;
    }
    const rows = this.#filtered(feed, filter);
    const n = Math.max(0, Math.min(MAX_PAGE, limit));
    const from = Math.max(0, Math.min(offset, rows.length));
    const slice = filter.order === 'desc' ? rows.slice(Math.max(0, rows.length - from - n), rows.length - from).reverse() : rows.slice(from, from + n);
    return { total: rows.length, offset: from, rows: slice.map(traceItem), tools: this.#tools };
  }

  #filtered(feed: DebugFeed, f: TraceFilter): readonly TraceRow[] {
    const key = JSON.stringify([f.q ?? '', f.status ?? '', f.tool ?? '', f.episode ?? '']);
    if (key === '["","","",""]') return this.#all;
    if (this.#cached?.key === key && this.#cached.version === feed.index.version) return this.#cached.rows;
    const query = parseQuery(f.q ?? '');
    const rows = this.#all.filter(
      (t) =>
        (f.status === undefined || f.status === '' || t.status === f.status) &&
        (f.tool === undefined || f.tool === '' || t.action === f.tool) &&
        (f.episode === undefined || t.episode === f.episode) &&
        matches(query, { tool: t.action, status: t.status, ep: t.episode, trace: t.traceId, code: t.error?.code }, `${t.traceId} ${t.action} ${t.status} ${t.error?.code ?? ''} ${t.error?.message ?? ''}`),
    );
    this.#cached = { key, version: feed.index.version, rows };
    return rows;
  }
}

function returnOf(r: { readonly value: number; readonly pending: number } | undefined, atEnd: number | undefined): Pick<EpisodeItem, 'reward' | 'pending_rewards'> {
  if (r) return { reward: r.value, ...(r.pending > 0 ? { pending_rewards: r.pending } : {}) };
  return atEnd !== undefined ? { reward: atEnd } : {};
}

/** Episodes in order, a page at a time: `offset` counts from the first episode seen. */
export class EpisodeQuery {
  /** Episode numbers, sorted once per new episode (rows are looked up at answer time: a resume replaces them). */
  #order: number[] = [];

  page(feed: DebugFeed, offset: number, limit: number): EpisodePage {
    const { episodes } = feed.index;
    if (this.#order.length !== episodes.size) this.#order = [...episodes.keys()].sort((a, b) => a - b);
    const from = Math.max(0, Math.min(offset, this.#order.length));
    const rows: EpisodeItem[] = [];
    for (const n of this.#order.slice(from, from + Math.max(0, Math.min(MAX_PAGE, limit)))) {
      const e = episodes.get(n);
      if (!e) continue;
      rows.push({
        episode: e.episode,
        instance_id: e.instanceId,
        started_at: e.startedAt,
        ...(e.finishedAt !== undefined ? { finished_at: e.finishedAt } : {}),
        ...(e.steps !== undefined ? { steps: e.steps } : {}),
        // The return as it stands (delayed values in as they land); an index without step rewards has the episode's end value only.
        ...returnOf(feed.index.episodeReturn(e.episode), e.reward),
        ...(e.reason !== undefined ? { reason: e.reason } : {}),
        events: e.refs.length,
      });
    }
    return { total: this.#order.length, offset: from, rows };
  }
}

function known(feed: DebugFeed, episode: number): void {
  if (!feed.index.episodes.has(episode)) throw new AgentError('UNKNOWN_EPISODE', `no episode ${episode} in ${feed.title}`, { hint: 'GET /api/episodes lists the episodes seen so far.' });
}

const num = (e: IndexedEvent, key: string): number | undefined => (typeof e[key] === 'number' ? (e[key] as number) : undefined);
const str = (e: IndexedEvent, key: string): string | undefined => (typeof e[key] === 'string' ? (e[key] as string) : undefined);

/** An episode on a time axis: each trace from dispatch to settle, its commits, and every reward's arrival. */
export async function timeline(feed: DebugFeed, episode: number, signal?: AbortSignal): Promise<EpisodeTimeline> {
  known(feed, episode);
  const events = await feed.episodeEvents(episode, signal);
  const row = feed.index.episodes.get(episode);
  const traces = new Map<string, { -readonly [K in keyof TimelineTrace]: TimelineTrace[K] }>();
  const commits: { seq: number; time: number; trace_id?: string }[] = [];
  const rewards: TimelineReward[] = [];
  const turns: TimelineTurn[] = [];
  let finishedAt = row?.finishedAt;
  for (const e of events) {
    const traceId = str(e, 'trace_id');
    const t = traceId === undefined ? undefined : traces.get(traceId);
    switch (e.type) {
      case 'dispatched':
        if (traceId !== undefined) traces.set(traceId, { trace_id: traceId, action: str(e, 'action') ?? '', status: 'pending', dispatched_at: e.time });
        break;
      case 'tool_started':
        if (t) t.started_at ??= e.time;
        break;
      case 'tool_finished':
        if (t) {
          t.tool_finished_at = e.time;
          const attempts = num(e, 'attempts');
          if (attempts !== undefined) t.attempts = attempts;
        }
        break;
      case 'trace_settled':
        if (t) {
          t.status = e['status'] === 'resolved' ? 'resolved' : 'failed';
          t.settled_at = e.time;
          const [step, seq, duration] = [num(e, 'step'), num(e, 'seq'), num(e, 'duration_ms')];
          if (step !== undefined) t.step = step;
          if (seq !== undefined) t.seq = seq;
          if (duration !== undefined) t.duration_ms = duration;
          const error = e['error'] as { code?: unknown; message?: unknown } | undefined;
          if (error && typeof error.code === 'string') t.error = { code: error.code, message: String(error.message ?? '').split('\n')[0] ?? '' };
        }
        break;
      case 'state_committed': {
        const seq = num(e, 'seq');
        if (seq !== undefined) commits.push({ seq, time: e.time, ...(traceId !== undefined ? { trace_id: traceId } : {}) });
        break;
      }
      case 'reward_arrived':
      case 'reward_late':
      case 'reward_imputed':
      case 'reward_failed': {
        const kind = e.type.slice('reward_'.length) as TimelineReward['kind'];
        const [value, delay] = [num(e, 'value'), num(e, 'delay_ms')];
        rewards.push({ trace_id: traceId ?? '', step: num(e, 'step') ?? 0, source: str(e, 'source') ?? '', kind, time: e.time, ...(value !== undefined ? { value } : {}), ...(delay !== undefined ? { delay_ms: delay } : {}) });
        break;
      }
      case 'episode_finished':
        finishedAt ??= e.time;
        break;
      case 'llm_call': {
        const tokens = e['tokens'] as TokenTurn | undefined;
        if (e['role'] !== 'policy' || !tokens) break;
        const { env_ids, prompt_length, token_ids, token_strs, logprobs, text, finish_reason, invalid, drift } = tokens;
        turns.push({ step: num(e, 'step') ?? 0, time: e.time, prompt_length, env_ids, token_ids, ...(token_strs ? { token_strs } : {}), logprobs, text, finish_reason, ...(invalid !== undefined ? { invalid } : {}), ...(drift ? { drift } : {}) });
        break;
      }
      default:
        break;
    }
  }
  return {
    episode,
    instance_id: row?.instanceId ?? '',
    started_at: row?.startedAt ?? events[0]?.time ?? 0,
    ...(finishedAt !== undefined ? { finished_at: finishedAt } : {}),
    traces: [...traces.values()],
    commits,
    rewards,
    turns,
  };
}

/** An episode's initial state and every commit's patch: the page replays them for any seq. */
export async function history(feed: DebugFeed, episode: number, signal?: AbortSignal): Promise<HistoryAnswer> {
  known(feed, episode);
  const h = await feed.episodeHistory(episode, signal);
  return { episode, instance_id: h.instanceId, initial: h.initial, commits: h.commits.map((c) => ({ seq: c.seq, time: c.time, ...(c.traceId !== undefined ? { trace_id: c.traceId } : {}), patch: c.patch as unknown as JsonValue })) };
}

function missedItem(r: RewardRow): RewardSourceFlow['missed'][number] {
  return {
    trace_id: r.traceId,
    episode: r.episode,
    step: r.step,
    status: r.status,
    ...(r.value !== undefined ? { value: r.value } : {}),
    ...(r.lateValue !== undefined ? { late_value: r.lateValue } : {}),
    ...(r.delayMs !== undefined ? { delay_ms: r.delayMs } : {}),
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
  };
}

/** Per source: where its values stand, how long they took, what is still awaited (with deadlines), what came late or never. */
export function rewardFlow(feed: DebugFeed, clock: () => number = Date.now): RewardFlow {
  const { index } = feed;
  const bySource = new Map<string, { delays: number[]; late: number[]; pending: RewardSourceFlow['pending'][number][]; missed: RewardRow[] }>();
  for (const source of index.rewardCounts.keys()) bySource.set(source, { delays: new Array<number>(DELAY_BOUNDS.length + 1).fill(0), late: new Array<number>(DELAY_BOUNDS.length + 1).fill(0), pending: [], missed: [] });
  for (const r of index.rewards) {
    const s = bySource.get(r.source);
    if (!s) continue;
    if (r.delayMs !== undefined && (r.status === 'arrived' || r.status === 'late')) {
      let b = 0;
      while (b < DELAY_BOUNDS.length && r.delayMs > (DELAY_BOUNDS[b] as number)) b++;
      s.delays[b] = (s.delays[b] ?? 0) + 1;
      if (r.status === 'late') s.late[b] = (s.late[b] ?? 0) + 1;
    }
    if (r.status === 'pending') s.pending.push({ trace_id: r.traceId, episode: r.episode, step: r.step, ...(r.deadlineAt !== undefined ? { deadline_at: r.deadlineAt } : {}) });
    else if (r.status !== 'arrived') s.missed.push(r);
  }
  const sources = [...bySource].map(([source, s]): RewardSourceFlow => {
    const counts = { ...(index.rewardCounts.get(source) as RewardCounts) };
    return {
      source,
      counts,
      on_time: onTime(counts),
      delays: s.delays.map((count, i) => ({ le_ms: DELAY_BOUNDS[i] ?? null, count, late: s.late[i] ?? 0 })),
      pending: s.pending.sort((a, b) => (a.deadline_at ?? Infinity) - (b.deadline_at ?? Infinity)).slice(0, LIST_CAP),
      missed: s.missed.slice(-LIST_CAP).reverse().map(missedItem),
    };
  });
  return { sources, now: nowOf(feed, clock), live: isLive(feed) };
}

/** Every schema violation, newest last, a page at a time; `q` filters as the terminal console's search does. */
export function violations(feed: DebugFeed, offset: number, limit: number, q = ''): ViolationPage {
  const query = parseQuery(q);
  const all = q.trim() === '' ? feed.index.violations : feed.index.violations.filter((v) => matches(query, { kind: v.kind, code: v.code, ep: v.episode, tool: v.action }, `${v.code} ${v.kind} ${v.action ?? ''} ${v.pointer} ${v.message}`));
  const from = Math.max(0, Math.min(offset, all.length));
  return {
    total: all.length,
    offset: from,
    rows: all.slice(from, from + Math.max(0, Math.min(MAX_PAGE, limit))).map((v) => ({
      time: v.time,
      kind: v.kind,
      code: v.code,
      ...(v.episode !== undefined ? { episode: v.episode } : {}),
      ...(v.traceId !== undefined ? { trace_id: v.traceId } : {}),
      ...(v.action !== undefined ? { action: v.action } : {}),
      pointer: v.pointer,
      message: v.message,
      ...(v.value !== undefined ? { value: v.value } : {}),
    })),
  };
}

/** curriculum.json in brief: each task with its weight, the heaviest first. */
export function curriculumDigest(file: CurriculumFile): CurriculumDigest {
  const tasks = Object.entries(file.tasks).map(([id, t]) => ({
    id,
    episodes: t.episodes,
    mean_reward: t.mean_reward,
    recent_success: t.recent.length === 0 ? null : t.recent.reduce<number>((a, b) => a + b, 0) / t.recent.length,
    weight: difficultyWeight(t.recent),
    weight_version: t.weight_version,
  }));
  return { draws: file.draws, tasks: tasks.sort((a, b) => b.weight - a.weight || a.id.localeCompare(b.id)) };
}

/** benchmark.json in brief: per task, whether it succeeded and which episodes ran it. */
export function benchmarkDigest(report: unknown): BenchmarkDigest | undefined {
  if (typeof report !== 'object' || report === null) return undefined;
  const r = report as { suite?: unknown; policy?: unknown; trials?: unknown; duration_ms?: unknown; metrics?: { success_rate?: BenchmarkDigest['success_rate'] }; tasks?: unknown };
  if (typeof r.suite !== 'string' || !Array.isArray(r.tasks)) return undefined;
  return {
    suite: r.suite,
    policy: String(r.policy ?? ''),
    trials: Number(r.trials ?? 1),
    duration_ms: Number(r.duration_ms ?? 0),
    ...(r.metrics?.success_rate ? { success_rate: r.metrics.success_rate } : {}),
    tasks: (r.tasks as { id?: unknown; trials?: { episode?: unknown; success?: unknown; reward?: unknown }[] }[]).map((t) => {
      const trials = Array.isArray(t.trials) ? t.trials : [];
      return {
        id: String(t.id ?? ''),
        success: trials.length > 0 && trials.every((x) => x.success === true),
        episodes: trials.map((x) => Number(x.episode)).filter(Number.isInteger),
        reward: trials.length === 0 ? 0 : trials.reduce((sum, x) => sum + Number(x.reward ?? 0), 0) / trials.length,
      };
    }),
  };
}

/**
 * The reward aggregator: where every step's rewards from every source meet. A step is opened
 * when it settles, with the values its tool reported and the delayed sources that will judge it;
 * values delivered later land on it by trace id, by (episode, step), or by event time (the step
 * whose state was current then). Promises:
 * - each delivery lands on the right step exactly once: a repeated idempotency key is a no-op,
 *   whatever the order of arrival, and a bad delivery (unknown step or source, a value outside
 *   the source's schema) is a typed error that changes nothing;
 * - deadlines are kept in a heap, so expiring them costs O(log n) per deadline, never a scan;
 *   a source past its deadline gets its fallback (`fallback`), and a value arriving after that
 *   is kept as `late` beside the imputed one;
 * - several values of one source on one step combine by the source's `aggregation`.
 * The ledger does no I/O and reads time from the injected clock: the live env, `agent reward` on
 * a finished run folder, and the tests all drive the same code.
 *
 * Over 500 lines on purpose: landing, deadlines, late values, replay and the SLA all read and
 * write the same per-step slots; their invariants (exactly once, late beside imputed) hold only
 * if they are kept in one place.
 */
import type { CallCost, RewardEntry, RewardEventType, RewardImputation, EnvEventOf } from '../events/env-events.js';
import { compileSchema } from '../schema/ajv.js';
import type { RewardAggregation, RewardSourceDefinition } from '../schema/definition.js';
import { ValidationError } from '../shared/errors.js';
import { checkDeliveryShape, invalid, type RewardDelivery } from './delivery.js';
import { MinHeap } from '../shared/min-heap.js';
import { cleanSum } from '../shared/float-sum.js';
import { slaOf, type Counts, type SlaCounts, type SourceSla } from './reward-sla.js';

export type { SlaCounts, SourceSla } from './reward-sla.js';

/** A settled step, as the ledger knows it. */
export interface StepRef {
  readonly traceId: string;
  readonly instanceId: string;
  readonly episode: number;
  /** 1-based, in settle order within the episode. */
  readonly step: number;
  readonly action: string;
  /** Event time (epoch ms) the step settled: delays and deadlines count from here. */
  readonly time: number;
}

export type { RewardDelivery } from './delivery.js';

/** What delivering one reward did: arrived, late or a duplicate, and the step it landed on (trace id, episode, step) with that step's reward now. */
export interface DeliveryResult {
  readonly outcome: 'arrived' | 'late' | 'duplicate';
  readonly trace_id: string;
  readonly episode: number;
  readonly step: number;
  readonly source: string;
  /** The step's reward after this delivery. */
  readonly reward: number;
}

/** A reward event of the env (`reward_arrived`, `reward_late`, `reward_imputed`, `reward_failed`, `reward_expected`). */
export type RewardEvent = EnvEventOf<RewardEventType>;

/** Which values a step's scalar reward counts: `final` (imputed ones at the deadline, the contract) or `arrived` (only what really arrived, late included). */
export type RewardBasis = 'final' | 'arrived';

export interface LedgerOptions {
  readonly now: () => number;
  /** Receives every change, in order. The live env turns them into events; `agent reward` into log lines. */
  readonly emit?: (event: RewardEvent) => void;
  /**
   * Keep the steps of at most this many ended episodes whose rewards are all final (a long-lived
   * server's memory stays flat); older ones are dropped, their returns kept (`droppedReturns`). A
   * value for a dropped step is refused like one for an unknown step. Default: every step is kept.
   */
  readonly retainEpisodes?: number;
}

const DEFAULT_KEY = 'default';

type SlotStatus = 'arrived' | 'fallback' | 'late' | 'failed';

/** One delayed source on one step. Absent (undefined) while pending, so a million pending rewards cost a million array holes. */
interface Slot {
  status: SlotStatus;
  values: number[];
  /** Idempotency keys of the values that landed here. */
  keys: Set<string>;
  lateValues?: number[];
  arrivedAt?: number;
  /** Past its deadline with nothing to impute: a later value is late. */
  overdue?: boolean;
  imputed?: RewardImputation;
  error?: string;
}

interface StepRecord {
  readonly ref: StepRef;
  /** Σ weight × value over the tool's own rewards. */
  readonly immediate: number;
  /** By delayed-source index: `null` not expected, `undefined` pending. */
  readonly slots: (Slot | null | undefined)[];
  /** Pending past a deadline with no fallback. */
  overdue?: Set<number>;
}

interface DelayedSource {
  readonly def: RewardSourceDefinition;
  readonly index: number;
  readonly check: (value: unknown) => boolean;
}

/** Every step's rewards by source as they arrive, late or imputed at their deadline: the step a delayed reward belongs to, and the total by basis. */
export class RewardLedger {
  readonly #now: () => number;
  readonly #emit: ((event: RewardEvent) => void) | undefined;
  readonly #delayed: DelayedSource[] = [];
  readonly #byName = new Map<string, DelayedSource>();
  readonly #sources: ReadonlyMap<string, RewardSourceDefinition>;
  readonly #steps = new Map<string, StepRecord>();
  /** Steps of each episode in settle order, by `instanceId \0 episode`. */
  readonly #episodes = new Map<string, StepRecord[]>();
  /** Episode number → the episode keys that used it (an episode number alone may be ambiguous across instances). */
  readonly #episodeKeys = new Map<number, string[]>();
  readonly #deadlines = new MinHeap<{ readonly rec: StepRecord; readonly index: number }>();
  /** Σ and n of arrived values per source (by index) and action: the `historical_mean` fallback. */
  readonly #history: Map<string, { sum: number; n: number }>[] = [];
  readonly #delays: number[][] = [];
  /** Per delayed source, kept as values move, so the live view reads them in O(1). */
  readonly #counts: Counts[] = [];
  readonly #retain: number;
  /** Ended episodes still held, oldest first (with `retainEpisodes`). */
  readonly #ended = new Set<string>();
  /** Returns of the episodes dropped, by episode number. */
  readonly #dropped = new Map<number, number>();

  constructor(sources: ReadonlyMap<string, RewardSourceDefinition>, options: LedgerOptions) {
    this.#now = options.now;
    this.#emit = options.emit;
    this.#retain = options.retainEpisodes ?? Infinity;
    this.#sources = sources;
    for (const def of sources.values()) {
      if (def.binding.kind === 'tool') continue;
      const validator = compileSchema(def.schema);
      const s: DelayedSource = { def, index: this.#delayed.length, check: (v) => validator(v) };
      this.#delayed.push(s);
      this.#byName.set(def.name, s);
      this.#delays.push([]);
      this.#history.push(new Map());
      this.#counts.push({ expected: 0, arrived: 0, fallback: 0, late: 0, failed: 0, pending: 0, imputed: 0 });
    }
  }

  /** False when every source is reported by its tool: then there is nothing to hold, and the env skips the ledger. */
  get hasDelayed(): boolean {
    return this.#delayed.length > 0;
  }

  /** Delayed sources by name (those values can arrive later). */
  get delayedSources(): readonly string[] {
    return this.#delayed.map((s) => s.def.name);
  }

  /** Steps held, and of their source values how many are still pending. */
  get size(): { readonly steps: number; readonly pending: number } {
    return { steps: this.#steps.size, pending: this.#counts.reduce((n, c) => n + c.pending, 0) };
  }

  /** Values of each delayed source by status, as of now. O(sources). */
  counts(): Record<string, SlaCounts> {
    const out: Record<string, SlaCounts> = {};
    for (const s of this.#delayed) out[s.def.name] = { ...(this.#counts[s.index] as Counts) };
    return out;
  }

  /** Move one value of source `index` from one status to another in the counts (null: not expected). */
  #move(index: number, from: SlotStatus | 'pending' | null, to: SlotStatus | 'pending'): void {
    const c = this.#counts[index] as Counts;
    if (from === null) c.expected++;
    else c[from]--;
    c[to]++;
  }

  /**
   * Register a settled step. `immediate` is what its tool reported (already validated);
   * `expected` names the delayed sources that will judge it (default: every step-scoped one).
   * Returns the step's reward entries as of now.
   */
  open(ref: StepRef, immediate: number, expected: Iterable<string> = this.#delayed.map((s) => s.def.name)): void {
    const slots: (Slot | null | undefined)[] = new Array<null>(this.#delayed.length).fill(null);
    const rec: StepRecord = { ref, immediate, slots };
    for (const name of expected) {
      const s = this.#byName.get(name);
      if (!s) continue;
      slots[s.index] = undefined;
      this.#move(s.index, null, 'pending');
      this.#schedule(rec, s);
    }
    this.#steps.set(ref.traceId, rec);
    const key = episodeKey(ref.instanceId, ref.episode);
    let list = this.#episodes.get(key);
    if (!list) {
      list = [];
      this.#episodes.set(key, list);
      const keys = this.#episodeKeys.get(ref.episode);
      if (keys) keys.push(key);
      else this.#episodeKeys.set(ref.episode, [key]);
    }
    // Settle order is time order except when the clock steps back; keep the list sorted by time for alignment.
    let i = list.length;
    while (i > 0 && (list[i - 1] as StepRecord).ref.time > ref.time) i--;
    list.splice(i, 0, rec);
  }

  /** A source that will judge an already-open step (an episode-scoped one, on the episode's last step). */
  expect(traceId: string, source: string): void {
    const rec = this.#steps.get(traceId);
    const s = this.#byName.get(source);
    if (!rec || !s || rec.slots[s.index] !== null) return;
    rec.slots[s.index] = undefined;
    this.#move(s.index, null, 'pending');
    const deadlineAt = this.#schedule(rec, s);
    const expected = this.#base(rec, s, 'reward_expected');
    this.#emit?.(deadlineAt !== undefined ? Object.assign(expected, { deadline_at: deadlineAt }) : expected);
  }

  /** An episode ended: past `retainEpisodes` ended ones, the oldest whose rewards are all final are dropped. */
  episodeEnded(instanceId: string, episode: number): void {
    if (this.#retain === Infinity) return;
    const key = episodeKey(instanceId, episode);
    if (this.#episodes.has(key)) this.#ended.add(key);
    let over = this.#ended.size - this.#retain;
    for (const k of this.#ended) {
      if (over <= 0) break;
      const list = this.#episodes.get(k) ?? [];
      if (list.some((rec) => rec.slots.includes(undefined) || (rec.overdue?.size ?? 0) > 0)) continue;
      const number = (list[0] as StepRecord).ref.episode;
      this.#dropped.set(number, (this.#dropped.get(number) ?? 0) + list.reduce((sum, rec) => sum + this.#reward(rec, 'final'), 0));
      for (const rec of list) this.#steps.delete(rec.ref.traceId);
      this.#episodes.delete(k);
      const keys = (this.#episodeKeys.get(number) ?? []).filter((x) => x !== k);
      if (keys.length > 0) this.#episodeKeys.set(number, keys);
      else this.#episodeKeys.delete(number);
      this.#ended.delete(k);
      over--;
    }
  }

  /** The returns (final basis) of the episodes dropped by `retainEpisodes`, by episode number. */
  droppedReturns(): ReadonlyMap<number, number> {
    return this.#dropped;
  }

  /** The last step of an episode, if it has one. */
  lastStep(instanceId: string, episode: number): StepRef | undefined {
    const list = this.#episodes.get(episodeKey(instanceId, episode));
    return list?.[list.length - 1]?.ref;
  }

  #schedule(rec: StepRecord, s: DelayedSource): number | undefined {
    const ms = s.def.deadlineMs;
    if (ms === undefined) return undefined;
    const at = rec.ref.time + ms;
    this.#deadlines.push(at, { rec, index: s.index });
    return at;
  }

  /**
   * Land a delivered value on its step. Validates everything first (the target, the source, the
   * value against the source's schema) and changes nothing on error.
   */
  deliver(d: RewardDelivery, arrivedAt = this.#now(), cost?: CallCost): DeliveryResult {
    checkDeliveryShape(d);
    const s = this.#sourceOf(d.source);
    const value = this.#valueOf(s, d.value);
    const rec = this.#target(d);
    const slot = rec.slots[s.index];
    if (slot === null) {
      throw invalid(`source '${s.def.name}' does not judge step ${rec.ref.step} of episode ${rec.ref.episode} (${rec.ref.traceId})`, '/source', 'It is scoped to the episode or limited by `when`; deliver it to a step it judges.');
    }
    if (d.key !== undefined && (typeof d.key !== 'string' || d.key === '')) throw invalid('key must be a non-empty string', '/key', 'Pass an idempotency key unique per value, or none (one value per step and source).');
    const key = d.key ?? DEFAULT_KEY;
    const { ref } = rec;
    if (slot?.keys.has(key)) return { outcome: 'duplicate', trace_id: ref.traceId, episode: ref.episode, step: ref.step, source: s.def.name, reward: this.#reward(rec, 'final') };
    const { outcome, reward } = this.#land(rec, s, value, key, arrivedAt, cost);
    return { outcome, trace_id: ref.traceId, episode: ref.episode, step: ref.step, source: s.def.name, reward };
  }

  #land(rec: StepRecord, s: DelayedSource, value: number, key: string, arrivedAt: number, cost?: CallCost): { outcome: 'arrived' | 'late'; reward: number } {
    const delayMs = Math.max(0, arrivedAt - rec.ref.time);
    let slot = rec.slots[s.index];
    const late = slot !== undefined && slot !== null ? slot.status !== 'arrived' : rec.overdue?.has(s.index) === true;
    if (late) {
      this.#move(s.index, slot ? slot.status : 'pending', 'late');
      if (!slot) slot = rec.slots[s.index] = { status: 'late', values: [], keys: new Set(), error: 'deadline passed with no fallback' };
      rec.overdue?.delete(s.index);
      const first = slot.lateValues === undefined;
      (slot.lateValues ??= []).push(value);
      slot.status = 'late';
      if (first) {
        slot.arrivedAt ??= arrivedAt;
        (this.#delays[s.index] as number[]).push(delayMs);
      }
    } else {
      if (!slot) {
        slot = rec.slots[s.index] = { status: 'arrived', values: [], keys: new Set(), arrivedAt };
        this.#move(s.index, 'pending', 'arrived');
        (this.#delays[s.index] as number[]).push(delayMs);
      }
      slot.values.push(value);
    }
    slot.keys.add(key);
    const history = this.#history[s.index] as Map<string, { sum: number; n: number }>;
    const stats = history.get(rec.ref.action);
    if (stats) {
      stats.sum += value;
      stats.n++;
    } else history.set(rec.ref.action, { sum: value, n: 1 });
    const reward = this.#reward(rec, 'final');
    // Replaying a log re-applies changes that were emitted (and written) the first time.
    if (!this.#replaying && this.#emit) {
      const { ref } = rec;
      const type = late ? 'reward_late' : 'reward_arrived';
      this.#emit({ type, time: arrivedAt, instance_id: ref.instanceId, trace_id: ref.traceId, episode: ref.episode, step: ref.step, source: s.def.name, value, key, delay_ms: delayMs, reward, ...(cost ? { cost } : {}) });
    }
    return { outcome: late ? 'late' : 'arrived', reward };
  }

  /**
   * A module or judge source could not produce a value for a step (after its retries, or its
   * budget is spent): its fallback applies at once if it declares one, otherwise it is failed.
   */
  fail(traceId: string, source: string, reason: string): void {
    const rec = this.#steps.get(traceId);
    const s = this.#byName.get(source);
    if (!rec || !s || rec.slots[s.index] !== undefined) return;
    if (!this.#impute(rec, s, `the source failed: ${reason}`)) {
      rec.slots[s.index] = { status: 'failed', values: [], keys: new Set(), error: reason };
      this.#move(s.index, 'pending', 'failed');
      this.#emit?.(Object.assign(this.#base(rec, s, 'reward_failed'), { reason }));
    }
  }

  /** Apply every deadline due by `now`. Returns how many source values it settled. */
  expire(now = this.#now()): number {
    let n = 0;
    for (let at = this.#deadlines.peekKey(); at !== undefined && at <= now; at = this.#deadlines.peekKey()) {
      const { rec, index } = this.#deadlines.pop() as { rec: StepRecord; index: number };
      if (rec.slots[index] !== undefined || this.#steps.get(rec.ref.traceId) !== rec) continue;
      const s = this.#delayed[index] as DelayedSource;
      n++;
      if (!this.#impute(rec, s, `no value by the deadline (${s.def.deadlineMs} ms)`, at)) (rec.overdue ??= new Set()).add(index);
    }
    return n;
  }

  /** When the next deadline falls due (epoch ms), if any is pending. */
  nextDeadline(): number | undefined {
    return this.#deadlines.peekKey();
  }

  /** Impute the source's fallback; false when it has none (or its history is empty). */
  #impute(rec: StepRecord, s: DelayedSource, reason: string, time = this.#now()): boolean {
    const fb = s.def.fallback;
    if (!fb) return false;
    let imputed: RewardImputation;
    if ('value' in fb) imputed = { value: fb.value, strategy: 'value', reason };
    else {
      const h = this.#history[s.index]?.get(rec.ref.action);
      if (!h || h.n === 0) return false;
      imputed = { value: h.sum / h.n, strategy: 'historical_mean', sample_size: h.n, reason };
    }
    rec.slots[s.index] = { status: 'fallback', values: [], keys: new Set(), imputed };
    this.#move(s.index, 'pending', 'fallback');
    (this.#counts[s.index] as Counts).imputed++;
    this.#emit?.(
      Object.assign(this.#base(rec, s, 'reward_imputed', time), {
        value: imputed.value,
        strategy: imputed.strategy,
        ...(imputed.sample_size !== undefined ? { sample_size: imputed.sample_size } : {}),
        reason,
        reward: this.#reward(rec, 'final'),
      }),
    );
    return true;
  }

  /**
   * Re-apply an event read back from a reward log (`agent reward` on a run folder): the same
   * change, without emitting it again.
   */
  replay(event: RewardEvent): void {
    const rec = this.#steps.get(event.trace_id);
    const s = this.#byName.get(event.source);
    if (!rec || !s) return;
    switch (event.type) {
      case 'reward_expected':
        if (rec.slots[s.index] === null) {
          rec.slots[s.index] = undefined;
          this.#move(s.index, null, 'pending');
          this.#schedule(rec, s);
        }
        return;
      case 'reward_arrived':
      case 'reward_late': {
        if (rec.slots[s.index]?.keys.has(event.key)) return;
        if (event.type === 'reward_late' && rec.slots[s.index] === undefined) (rec.overdue ??= new Set()).add(s.index);
        this.#withoutEmit(() => this.#land(rec, s, event.value, event.key, event.time));
        return;
      }
      case 'reward_imputed':
        if (rec.slots[s.index] !== undefined) return;
        this.#move(s.index, 'pending', 'fallback');
        (this.#counts[s.index] as Counts).imputed++;
        rec.slots[s.index] = {
          status: 'fallback',
          values: [],
          keys: new Set(),
          imputed: { value: event.value, strategy: event.strategy, ...(event.sample_size !== undefined ? { sample_size: event.sample_size } : {}), reason: event.reason },
        };
        return;
      case 'reward_failed':
        if (rec.slots[s.index] === undefined) {
          this.#move(s.index, 'pending', 'failed');
          rec.slots[s.index] = { status: 'failed', values: [], keys: new Set(), error: event.reason };
        }
        return;
    }
  }

  #replaying = false;

  #withoutEmit<T>(work: () => T): T {
    this.#replaying = true;
    try {
      return work();
    } finally {
      this.#replaying = false;
    }
  }

  /** A step's rewards per source, as of now (tool sources are not kept here: see the step's settle record). */
  entries(traceId: string): Record<string, RewardEntry> | undefined {
    const rec = this.#steps.get(traceId);
    if (!rec) return undefined;
    const out: Record<string, RewardEntry> = {};
    for (const s of this.#delayed) {
      const slot = rec.slots[s.index];
      if (slot === null) continue;
      out[s.def.name] = entryOf(rec, s.def, slot);
    }
    return out;
  }

  /** The step's scalar reward: Σ weight × value, over its tool's rewards and the delayed values `basis` counts. */
  reward(traceId: string, basis: RewardBasis = 'final'): number | undefined {
    const rec = this.#steps.get(traceId);
    return rec ? this.#reward(rec, basis) : undefined;
  }

  /** Every step held, in the order they were opened. */
  *steps(): IterableIterator<StepRef> {
    for (const rec of this.#steps.values()) yield rec.ref;
  }

  #reward(rec: StepRecord, basis: RewardBasis): number {
    let total = rec.immediate;
    for (const s of this.#delayed) {
      const slot = rec.slots[s.index];
      if (!slot) continue;
      const v = usedValue(slot, s.def.aggregation, basis);
      if (v !== null) total += s.def.weight * v;
    }
    return cleanSum(total);
  }

  /** Arrival statistics per delayed source, the SLA the reward schema promises. */
  sla(): Record<string, SourceSla> {
    const out: Record<string, SourceSla> = {};
    for (const s of this.#delayed) out[s.def.name] = slaOf(this.#counts[s.index] as Counts, this.#delays[s.index] as number[]);
    return out;
  }

  #sourceOf(name: unknown): DelayedSource {
    if (typeof name !== 'string') throw invalid('source must be a string', '/source', `Name one of: ${this.#delayed.map((s) => s.def.name).join(', ') || '(no delayed source)'}.`);
    const s = this.#byName.get(name);
    if (s) return s;
    if (this.#sources.has(name)) throw invalid(`source '${name}' is reported by its tool with each step; it cannot be delivered later`, '/source', `Deliverable sources: ${this.#delayed.map((x) => x.def.name).join(', ') || 'none'}.`);
    throw invalid(`unknown reward source '${name}'`, '/source', `The reward schema declares: ${[...this.#sources.keys()].join(', ') || 'none'}.`);
  }

  #valueOf(s: DelayedSource, raw: unknown): number {
    if (!s.check(raw)) {
      throw new ValidationError('REWARD_INVALID', `value ${JSON.stringify(raw) ?? String(raw)} for '${s.def.name}' violates the source's schema`, [{ pointer: '/value', message: `must match ${JSON.stringify(s.def.schema)}` }], 'Send a value within the range reward_schema.json declares.');
    }
    if (typeof raw === 'boolean') return raw ? 1 : 0;
    if (typeof raw !== 'number' || !Number.isFinite(raw)) throw invalid(`value ${JSON.stringify(raw) ?? String(raw)} for '${s.def.name}' is not a finite number`, '/value', 'Send a number (or a boolean).');
    return raw;
  }

  #target(d: RewardDelivery): StepRecord {
    if (d.trace_id !== undefined) {
      const rec = typeof d.trace_id === 'string' ? this.#steps.get(d.trace_id) : undefined;
      if (!rec) throw invalid(`no step has trace id ${JSON.stringify(d.trace_id)}`, '/trace_id', 'Use a trace_id from trajectories.jsonl (or episode + step).');
      return rec;
    }
    if (d.episode === undefined) throw invalid('the delivery names no step', '', 'Give trace_id, or episode with step or time.');
    if (!Number.isInteger(d.episode)) throw invalid('episode must be an integer', '/episode', 'Use the episode index of trajectories.jsonl.');
    const steps = this.#episodeSteps(d.episode, d.instance_id);
    if (d.step !== undefined) {
      const rec = Number.isInteger(d.step) ? steps.find((r) => r.ref.step === d.step) : undefined;
      if (!rec) throw invalid(`episode ${d.episode} has no step ${JSON.stringify(d.step)} (it has ${steps.length})`, '/step', 'Steps count from 1 in settle order.');
      return rec;
    }
    if (d.time === undefined) throw invalid('episode is given without step or time', '', 'Add step (1-based) or time (the event time the reward is about).');
    const time = typeof d.time === 'string' ? Date.parse(d.time) : d.time;
    if (typeof time !== 'number' || !Number.isFinite(time)) throw invalid(`time ${JSON.stringify(d.time)} is not a time`, '/time', 'Use epoch milliseconds or an ISO 8601 string.');
    // The step whose state was current at `time`: the last one settled at or before it.
    let lo = 0;
    let hi = steps.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((steps[mid] as StepRecord).ref.time <= time) lo = mid + 1;
      else hi = mid;
    }
    const rec = steps[lo - 1];
    if (!rec) throw invalid(`time ${new Date(time).toISOString()} is before the first step of episode ${d.episode}`, '/time', 'A reward about a moment must come after the step it judges.');
    return rec;
  }

  #episodeSteps(episode: number, instanceId: string | undefined): StepRecord[] {
    if (instanceId !== undefined) {
      const list = this.#episodes.get(episodeKey(instanceId, episode));
      if (!list) throw invalid(`instance '${instanceId}' has no episode ${episode}`, '/episode', 'Check instance_id and episode against trajectories.jsonl.');
      return list;
    }
    const keys = this.#episodeKeys.get(episode) ?? [];
    if (keys.length === 0) throw invalid(`no episode ${episode} has steps`, '/episode', 'Use an episode index from trajectories.jsonl.');
    if (keys.length > 1) throw invalid(`episode ${episode} is ambiguous: ${keys.length} instances ran an episode with that number`, '/instance_id', 'Add instance_id, or deliver by trace_id.');
    return this.#episodes.get(keys[0] as string) as StepRecord[];
  }

  /** A reward event's common fields; the caller adds its own with Object.assign (a spread followed by keys makes a hidden class per object on Node 20). */
  #base<T extends RewardEventType>(rec: StepRecord, s: DelayedSource, type: T, time = this.#now()): { type: T; time: number; instance_id: string; trace_id: string; episode: number; step: number; source: string } {
    return { type, time, instance_id: rec.ref.instanceId, trace_id: rec.ref.traceId, episode: rec.ref.episode, step: rec.ref.step, source: s.def.name };
  }
}

function episodeKey(instanceId: string, episode: number): string {
  return `${instanceId}\u0000${episode}`;
}

function aggregate(values: readonly number[], how: RewardAggregation): number | null {
  if (values.length === 0) return null;
  switch (how) {
    case 'sum':
      return values.reduce((a, b) => a + b, 0);
    case 'mean':
      return values.reduce((a, b) => a + b, 0) / values.length;
    case 'last':
      return values[values.length - 1] as number;
    case 'min':
      return Math.min(...values);
    case 'max':
      return Math.max(...values);
  }
}

function usedValue(slot: Slot, how: RewardAggregation, basis: RewardBasis): number | null {
  switch (slot.status) {
    case 'arrived':
      return aggregate(slot.values, how);
    case 'fallback':
      return basis === 'final' ? (slot.imputed?.value ?? null) : null;
    case 'late':
      return basis === 'final' && slot.imputed ? slot.imputed.value : aggregate(slot.lateValues ?? [], how);
    case 'failed':
      return null;
  }
}

function entryOf(rec: StepRecord, def: RewardSourceDefinition, slot: Slot | undefined): RewardEntry {
  const deadline = def.deadlineMs !== undefined ? { deadline_at: rec.ref.time + def.deadlineMs } : {};
  // Pending: nothing arrived yet, but the source declared when to expect it.
  if (!slot) return { status: 'pending', value: null, arrived_at: null, delay_ms: null, expected_at: rec.ref.time + def.delayMs, ...deadline };
  const values = slot.status === 'late' ? (slot.lateValues ?? []) : slot.values;
  return {
    status: slot.status,
    value: usedValue(slot, def.aggregation, 'final'),
    arrived_at: slot.arrivedAt ?? null,
    delay_ms: slot.arrivedAt === undefined ? null : Math.max(0, slot.arrivedAt - rec.ref.time),
    ...deadline,
    ...(slot.imputed ? { imputed: slot.imputed } : {}),
    ...(slot.status === 'late' ? { late_value: aggregate(values, def.aggregation) as number } : {}),
    ...(slot.error !== undefined && slot.status !== 'late' ? { error: slot.error } : {}),
    ...(values.length > 1 ? { count: values.length } : {}),
  };
}

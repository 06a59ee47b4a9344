/**
 * The in-memory StateStore: the embedded default. States are immutable and structurally
 * shared (see patch.ts), so a snapshot is a reference, not a copy.
 */
import { raceAbort } from '../shared/abort.js';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { reconstructState, type Delta, type Snapshot, type StateBounds, type StatePoint, type StateStore, type StateStoreOptions, type TrimResult } from './store.js';

interface Log {
  /** deltas[i].seq === deltas[0].seq + i */
  deltas: Delta[];
  /** ascending by seq; snapshots[0] is the oldest reconstructable point */
  snapshots: Snapshot[];
  headSeq: number;
  headTime: number;
}

/** Episode states in memory: each instance's deltas and snapshots, trimmed as configured. The default store. */
export class MemoryStateStore implements StateStore {
  readonly #logs = new Map<string, Log>();
  readonly #snapshotEvery: number;
  readonly #retainDeltas: number | undefined;
  readonly #archive: StateStoreOptions['archive'];

  constructor(options: StateStoreOptions = {}) {
    this.#snapshotEvery = Math.max(1, options.snapshotEvery ?? 50);
    this.#retainDeltas = options.retainDeltas;
    this.#archive = options.archive;
  }

  async init(instanceId: string, state: JsonValue, time: number): Promise<void> {
    this.#logs.set(instanceId, { deltas: [], snapshots: [{ seq: 0, time, state }], headSeq: 0, headTime: time });
  }

  async append(instanceId: string, delta: Omit<Delta, 'seq'>, stateAfter: JsonValue): Promise<number> {
    return this.appendNow(instanceId, delta, stateAfter);
  }

  appendNow(instanceId: string, delta: Omit<Delta, 'seq'>, stateAfter: JsonValue): number | Promise<number> {
    const log = this.#log(instanceId);
    const seq = log.headSeq + 1;
    const time = Math.max(delta.time, log.headTime);
    log.deltas.push(delta.trace_id === undefined ? { seq, time, patch: delta.patch } : { seq, time, patch: delta.patch, trace_id: delta.trace_id });
    log.headSeq = seq;
    log.headTime = time;
    if (seq % this.#snapshotEvery === 0) log.snapshots.push({ seq, time, state: stateAfter });
    if (this.#retainDeltas !== undefined && log.deltas.length > this.#retainDeltas + this.#snapshotEvery) {
      return this.trim(instanceId, this.#retainDeltas).then(() => seq);
    }
    return seq;
  }

  async read(instanceId: string, fromSeq: number, toSeq: number): Promise<Delta[]> {
    const log = this.#logs.get(instanceId);
    if (!log || log.deltas.length === 0) return [];
    const first = (log.deltas[0] as Delta).seq;
    return log.deltas.slice(Math.max(0, fromSeq - first), Math.max(0, toSeq - first + 1));
  }

  async snapshotAt(instanceId: string, seq: number): Promise<Snapshot | undefined> {
    const snaps = this.#logs.get(instanceId)?.snapshots ?? [];
    // Binary search: the last snapshot with snap.seq <= seq.
    let lo = 0;
    let hi = snaps.length - 1;
    let found: Snapshot | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const s = snaps[mid] as Snapshot;
      if (s.seq <= seq) {
        found = s;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  async bounds(instanceId: string): Promise<StateBounds | undefined> {
    const log = this.#logs.get(instanceId);
    if (!log) return undefined;
    return { oldestSeq: (log.snapshots[0] as Snapshot).seq, headSeq: log.headSeq, headTime: log.headTime };
  }

  async seqAtTime(instanceId: string, time: number): Promise<number | undefined> {
    const log = this.#logs.get(instanceId);
    if (!log) return undefined;
    const oldest = log.snapshots[0] as Snapshot;
    if (time < oldest.time) return undefined;
    // Binary search: the last delta with d.time <= time; deltas at or before the oldest snapshot are gone.
    let lo = 0;
    let hi = log.deltas.length - 1;
    let seq = oldest.seq;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const d = log.deltas[mid] as Delta;
      if (d.time <= time) {
        seq = Math.max(seq, d.seq);
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return seq;
  }

  stateAt(instanceId: string, point: StatePoint, signal?: AbortSignal): Promise<Snapshot> {
    return raceAbort(reconstructState(this, instanceId, point), signal);
  }

  async trim(instanceId: string, keepDeltas: number): Promise<TrimResult> {
    const log = this.#logs.get(instanceId);
    if (!log) return { removedDeltas: 0, oldestSeq: 0 };
    const target = log.headSeq - Math.max(0, keepDeltas);
    const cut = await this.snapshotAt(instanceId, target);
    const oldest = (log.snapshots[0] as Snapshot).seq;
    if (!cut || cut.seq <= oldest) return { removedDeltas: 0, oldestSeq: oldest };
    const first = log.deltas[0]?.seq ?? cut.seq + 1;
    const removed = log.deltas.slice(0, Math.max(0, cut.seq - first + 1));
    if (removed.length > 0 && this.#archive) await this.#archive(instanceId, removed);
    log.deltas = log.deltas.slice(removed.length);
    log.snapshots = log.snapshots.filter((s) => s.seq >= cut.seq);
    return { removedDeltas: removed.length, oldestSeq: cut.seq };
  }

  async drop(instanceId: string): Promise<void> {
    this.#logs.delete(instanceId);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#logs.clear();
  }

  #log(instanceId: string): Log {
    const log = this.#logs.get(instanceId);
    if (!log) throw new AgentError('STATE_SEQ_UNKNOWN', `instance '${instanceId}' has no state history`, { hint: 'Call init (reset on the instance) first.' });
    return log;
  }
}

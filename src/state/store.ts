/**
 * The StateStore port: an instance's state is an append-only log of JSON Patch deltas with
 * periodic snapshots. Adapters (memory here, Redis later) implement the primitives; the
 * reconstruction logic (`stateAt`) is shared in {@link reconstructState} so that every adapter
 * answers time-travel queries the same way, and one conformance suite checks them all.
 */
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { applyPatch, type Patch } from './patch.js';

/** One committed change to an instance's state: its seq, the patch, when, and the trace that made it. */
export interface Delta {
  /** 1-based, dense per instance. seq 0 is the base snapshot written by `init`. */
  readonly seq: number;
  /** Event time, epoch ms, never decreasing within an instance. */
  readonly time: number;
  readonly patch: Patch;
  readonly trace_id?: string;
}

/** An instance's whole state at a seq. */
export interface Snapshot {
  readonly seq: number;
  readonly time: number;
  readonly state: JsonValue;
}

/** A point in an instance's history: a seq, or a time. */
export type StatePoint = { readonly seq: number } | { readonly time: number };

/** The seqs an instance's history holds: the oldest still readable and the head. */
export interface StateBounds {
  readonly oldestSeq: number;
  readonly headSeq: number;
  readonly headTime: number;
}

/** What trimming did: deltas removed, and the oldest seq still readable. */
export interface TrimResult {
  readonly removedDeltas: number;
  /** The oldest seq whose state can still be reconstructed. */
  readonly oldestSeq: number;
}

/** Where instances' state histories live: append deltas, read them back, rebuild the state at any point, trim, drop. Memory and Redis implement it alike. */
export interface StateStore extends AsyncDisposable {
  /** Start an instance's history: a snapshot of `state` at seq 0. Replaces any earlier history. */
  init(instanceId: string, state: JsonValue, time: number, signal?: AbortSignal): Promise<void>;
  /**
   * Append a delta; returns its seq. `stateAfter` is the state the delta produced: the store
   * keeps it as a snapshot every `snapshotEvery` deltas, which bounds replay cost.
   */
  append(instanceId: string, delta: Omit<Delta, 'seq'>, stateAfter: JsonValue, signal?: AbortSignal): Promise<number>;
  /**
   * Optional: `append` done at once, for an adapter that can (memory). Returns the seq, or a
   * promise of it when the append had to wait (archiving trimmed deltas). The env core uses it
   * to commit a step without a promise when nothing is queued before it.
   */
  appendNow?(instanceId: string, delta: Omit<Delta, 'seq'>, stateAfter: JsonValue): number | Promise<number>;
  /** Deltas with `fromSeq <= seq <= toSeq`, ascending. */
  read(instanceId: string, fromSeq: number, toSeq: number, signal?: AbortSignal): Promise<Delta[]>;
  /** The newest snapshot at or before `seq`, if one is kept. */
  snapshotAt(instanceId: string, seq: number, signal?: AbortSignal): Promise<Snapshot | undefined>;
  /** The reconstructable range: oldest kept seq, and seq and time of the newest delta. */
  bounds(instanceId: string, signal?: AbortSignal): Promise<StateBounds | undefined>;
  /** The seq of the newest delta whose time is `<= time` (0 for the base snapshot), or undefined if none is kept. */
  seqAtTime(instanceId: string, time: number, signal?: AbortSignal): Promise<number | undefined>;
  /** The state as it was at a seq or time. */
  stateAt(instanceId: string, point: StatePoint, signal?: AbortSignal): Promise<Snapshot>;
  /**
   * Drop old deltas, keeping about `keepDeltas` of the newest. Never cuts below a kept snapshot:
   * the cut lands on the newest snapshot at or before the target, so every seq from the
   * returned `oldestSeq` on stays reconstructable. Removed deltas go to the store's archiver first.
   */
  trim(instanceId: string, keepDeltas: number, signal?: AbortSignal): Promise<TrimResult>;
  /** Forget an instance entirely. */
  drop(instanceId: string, signal?: AbortSignal): Promise<void>;
}

/** How a store keeps histories: a snapshot every so many deltas, and how many deltas to retain. */
export interface StateStoreOptions {
  /** Take a snapshot every K deltas (default 50). */
  readonly snapshotEvery?: number;
  /** Trim automatically once an instance holds this many deltas past its oldest snapshot (default: never). */
  readonly retainDeltas?: number;
  /** Receives deltas before trimming removes them, so old history is archived rather than silently lost. */
  readonly archive?: (instanceId: string, deltas: readonly Delta[]) => Promise<void> | void;
}

function stateSeqError(instanceId: string, point: StatePoint, bounds: StateBounds | undefined): AgentError {
  const what = 'seq' in point ? `seq ${point.seq}` : `time ${new Date(point.time).toISOString()}`;
  if (!bounds) {
    return new AgentError('STATE_SEQ_UNKNOWN', `instance '${instanceId}' has no state history`, { hint: 'Call reset() on the instance first.' });
  }
  if ('seq' in point && point.seq > bounds.headSeq) {
    return new AgentError('STATE_SEQ_UNKNOWN', `instance '${instanceId}' has no ${what} (head is ${bounds.headSeq})`, {
      hint: `Ask for a seq between ${bounds.oldestSeq} and ${bounds.headSeq}.`,
    });
  }
  return new AgentError('STATE_SEQ_TRIMMED', `instance '${instanceId}': ${what} is older than the oldest kept state (seq ${bounds.oldestSeq})`, {
    hint: 'Raise retainDeltas, or read the archived deltas.',
  });
}

/** Shared reconstruction used by every adapter: nearest snapshot, then replay the deltas after it. */
export async function reconstructState(store: StateStore, instanceId: string, point: StatePoint, signal?: AbortSignal): Promise<Snapshot> {
  const bounds = await store.bounds(instanceId, signal);
  const seq = 'seq' in point ? point.seq : await store.seqAtTime(instanceId, point.time, signal);
  if (!bounds || seq === undefined || !Number.isInteger(seq) || seq < bounds.oldestSeq || seq > bounds.headSeq) {
    throw stateSeqError(instanceId, point, bounds);
  }
  const snap = await store.snapshotAt(instanceId, seq, signal);
  if (!snap) throw stateSeqError(instanceId, point, bounds);
  if (snap.seq === seq) return snap;
  let state = snap.state;
  let time = snap.time;
  for (const d of await store.read(instanceId, snap.seq + 1, seq, signal)) {
    state = applyPatch(state, d.patch);
    time = d.time;
  }
  return { seq, time, state };
}

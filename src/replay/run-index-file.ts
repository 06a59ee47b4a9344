/**
 * `events.index`: what the debug index needs from `events.jsonl`, written beside it by the run
 * writer as events are written, so that `agent debug` and the web console open a run of a
 * million events without reading (and parsing) the 250 MB of events themselves.
 *
 * Binary, append-only, one record per event in the order of the events file. Every event record
 * starts with the byte length of its line in `events.jsonl` (so offsets add up, and a reader
 * knows which prefix of the events file the index covers) and its time as a delta from the
 * previous event's. The frequent events are reduced to the fields the index reads, attributed to
 * their episode when written; any other event, and any the writer cannot attribute exactly as
 * the index would, is kept whole as JSON (without params, observations and patches). So a
 * reader that replays the records builds the same index as one that reads every line.
 *
 * Layout: the magic `AGENTIX2`, then records, each a kind byte and its fields. Integers are
 * unsigned LEB128 varints, numbers float64 little-endian (NaN: none), strings either interned
 * (a `STRING` record defines the next id; names of actions, sources, statuses: few and reused) or
 * inline (length + UTF-8: trace ids, which are unique). A trace is referred to by its ordinal
 * among the `DISPATCHED` records (counted back from the latest) while the writer knows it, by its
 * id after that. `RESET` (a resumed run) starts the ids and ordinals again; `GAP n` says that the
 * next n bytes of events.jsonl have no records (written before the index, or lost in a crash) and
 * are read from the events file itself.
 *
 * This module is the format and its reader; the writer's side is run-index-encoder.ts.
 */
import type { FileHandle } from 'node:fs/promises';
import type { RewardStatus } from '../events/env-events.js';
import type { IndexedEvent, RunIndex, TraceRow } from './run-index.js';

// AGENTIX2: SETTLED and REWARD records carry their step's reward (an episode's return is read from them).
export const INDEX_MAGIC = Buffer.from('AGENTIX2', 'latin1');

/** The record kinds; every record starts with one as a byte. */
export const Kind = {
  STRING: 0,
  RESET: 1,
  GAP: 2,
  EVENT: 3,
  REF: 4,
  DISPATCHED: 5,
  TOOL_FINISHED: 6,
  SETTLED: 7,
  REWARD: 8,
  EPISODE_STARTED: 9,
  EPISODE_FINISHED: 10,
} as const;
export type Kind = (typeof Kind)[keyof typeof Kind];

/** Thrown inside the decoder: the chunk ends mid-record (more bytes may come) or the bytes make no sense. */
const TORN = Symbol('torn');
const CORRUPT = Symbol('corrupt');

/**
 * Replays an index file's records into a {@link RunIndex} whose references are byte offsets in
 * events.jsonl. It stops (`stopped`) at the first record for an event not (yet) in the events
 * file, at a record it cannot read, and pauses at a `GAP` (`gap` > 0) for the caller to read that
 * stretch of events.jsonl itself; `offset` is always the end of the events covered so far.
 */
export class IndexReplay {
  /** Bytes of events.jsonl covered by the records replayed so far. */
  offset = 0;
  /** Bytes of events.jsonl, at `offset`, the caller must index from the events file before replaying on. */
  gap = 0;
  stopped = false;
  /** Undefined: only find where the records end (a resumed run's writer cutting a torn tail). */
  readonly #index: RunIndex<number> | undefined;
  readonly #limit: number;
  #strings: string[] = [];
  /** The rows of the traces dispatched since the last `RESET` (undefined ones when only measuring). */
  #ordinals: (TraceRow | undefined)[] = [];
  #time = 0;
  #buf: Buffer = Buffer.alloc(0);
  #at = 0;
  /** Scratch space for a record's rewards, reused: a million-event replay allocates only what the index keeps. */
  readonly #fields: { value?: number; delay_ms?: number; deadline_at?: number; reward?: number } = {};
  readonly #rewards = { sources: [] as string[], statuses: [] as RewardStatus[], values: [] as (number | undefined)[] };

  /** `limit`: the size of events.jsonl now; records past it wait for a later read. */
  constructor(index: RunIndex<number> | undefined, limit: number) {
    this.#index = index;
    this.#limit = limit;
  }

  /** Replays the whole records at the start of `chunk`; returns how many bytes they took. */
  replay(chunk: Buffer): number {
    this.#buf = chunk;
    this.#at = 0;
    let used = 0;
    try {
      while (this.#at < chunk.length && this.gap === 0) {
        this.#record();
        // A record it stopped at is not used: a resumed writer cuts the index before it.
        if (this.stopped) break;
        used = this.#at;
      }
    } catch (err) {
      if (err === CORRUPT) this.stopped = true;
      else if (err !== TORN) throw err;
    }
    return used;
  }

  /** The caller has indexed the gap's bytes. */
  skipGap(): void {
    this.offset += this.gap;
    this.gap = 0;
  }

  #record(): void {
    const kind = this.#u8();
    if (kind === Kind.STRING) {
      this.#strings.push(internalize(this.#text()));
      return;
    }
    if (kind === Kind.RESET) {
      this.#strings = [];
      this.#ordinals = [];
      this.#time = 0;
      return;
    }
    const bytes = this.#uint();
    if (kind === Kind.GAP) {
      if (this.offset + bytes > this.#limit) this.stopped = true;
      else this.gap = bytes;
      return;
    }
    if (kind === Kind.EVENT) {
      const json = this.#text();
      if (this.#past(bytes)) return;
      const e = parseEvent(json);
      this.#time = e.time;
      this.#index?.ingest(e, this.offset);
      this.offset += bytes;
      return;
    }
    if (kind < Kind.REF || kind > Kind.EPISODE_FINISHED) throw CORRUPT;
    const time = this.#time + this.#uint();
    const code = this.#uint();
    const episode = code === 0 ? undefined : code - 1;
    const index = this.#index;
    switch (kind) {
      case Kind.REF:
        if (this.#past(bytes)) return;
        break;
      case Kind.DISPATCHED: {
        const traceId = this.#text();
        const action = this.#name();
        if (this.#past(bytes)) return;
        this.#ordinals.push(index?.dispatched(traceId, episode as number, action, time));
        break;
      }
      case Kind.TOOL_FINISHED: {
        const trace = this.#trace();
        const attempts = this.#uint();
        if (this.#past(bytes)) return;
        index?.toolFinished(typeof trace === 'string' ? index.trace(trace) : trace, attempts);
        break;
      }
      case Kind.SETTLED:
        if (!this.#settled(bytes, time)) return;
        break;
      case Kind.EPISODE_STARTED: {
        const instanceId = this.#name();
        const stateId = this.#name();
        if (this.#past(bytes)) return;
        index?.episodeStarted(episode as number, instanceId, stateId, time);
        break;
      }
      case Kind.EPISODE_FINISHED: {
        const steps = this.#uint();
        const reward = this.#number();
        const reason = this.#name();
        if (this.#past(bytes)) return;
        index?.episodeFinished(episode as number, time, steps, reward as number, reason);
        break;
      }
      default: {
        const trace = this.#trace();
        const type = this.#name();
        const source = this.#name();
        const key = this.#name();
        const step = this.#uint();
        const fields = this.#fields;
        fields.value = this.#number();
        fields.delay_ms = this.#number();
        fields.deadline_at = this.#number();
        fields.reward = this.#number();
        if (this.#past(bytes)) return;
        const row = typeof trace === 'string' ? undefined : trace;
        index?.reward(type, row ? row.traceId : (trace as string), episode as number, step, source, fields, key, row);
      }
    }
    this.#time = time;
    index?.referenceTo(episode, time, this.offset);
    this.offset += bytes;
  }

  #settled(bytes: number, time: number): boolean {
    const trace = this.#trace();
    const status = this.#name();
    const step = this.#uint();
    const duration = this.#number();
    const reward = this.#number();
    const n = this.#uint();
    // Read whole before anything is applied (the record may be torn); into arrays reused record after record.
    const { sources, statuses, values } = this.#rewards;
    for (let i = 0; i < n; i++) {
      sources[i] = this.#name();
      statuses[i] = this.#name() as RewardStatus;
      values[3 * i] = this.#number();
      values[3 * i + 1] = this.#number();
      values[3 * i + 2] = this.#number();
    }
    if (this.#past(bytes)) return false;
    const index = this.#index;
    const row = typeof trace === 'string' ? index?.trace(trace) : trace;
    if (index && row && index.settle(row, time, status, step, duration, undefined, reward)) {
      for (let i = 0; i < n; i++) index.settledReward(row, sources[i] as string, statuses[i] as RewardStatus, values[3 * i] ?? null, values[3 * i + 1] ?? null, values[3 * i + 2]);
    }
    return true;
  }

  /** The record is for an event past the end of events.jsonl (not flushed yet): stop before it. */
  #past(bytes: number): boolean {
    if (this.offset + bytes <= this.#limit) return false;
    this.stopped = true;
    return true;
  }

  /** A trace by ordinal (its row) or, after the writer forgot it, by id. */
  #trace(): TraceRow | string | undefined {
    const back = this.#uint();
    if (back === 0) return this.#text();
    if (back > this.#ordinals.length) throw CORRUPT;
    return this.#ordinals[this.#ordinals.length - back];
  }

  #name(): string {
    const s = this.#strings[this.#uint()];
    if (s === undefined) throw CORRUPT;
    return s;
  }

  #u8(): number {
    if (this.#at >= this.#buf.length) throw TORN;
    return this.#buf[this.#at++] as number;
  }

  #uint(): number {
    let n = 0;
    for (let scale = 1; ; scale *= 0x80) {
      const b = this.#u8();
      n += (b & 0x7f) * scale;
      if (b < 0x80) return n;
      if (scale > 2 ** 49) throw CORRUPT;
    }
  }

  #number(): number | undefined {
    if (this.#at + 8 > this.#buf.length) throw TORN;
    const v = this.#buf.readDoubleLE(this.#at);
    this.#at += 8;
    return Number.isNaN(v) ? undefined : v;
  }

  #text(): string {
    const n = this.#uint();
    if (this.#at + n > this.#buf.length) throw TORN;
    const s = this.#buf.toString('utf8', this.#at, this.#at + n);
    this.#at += n;
    return s;
  }
}

/**
 * The engine's own copy of a name (a property key is one): comparing it with a literal
 * ('resolved', 'reward_arrived') or reading a property by it then takes no character compare.
 */
function internalize(s: string): string {
  return Object.keys({ [s]: true })[0] ?? s;
}

function parseEvent(json: string): IndexedEvent {
  let e: unknown;
  try {
    e = JSON.parse(json);
  } catch {
    throw CORRUPT;
  }
  if (typeof e !== 'object' || e === null || typeof (e as IndexedEvent).type !== 'string' || typeof (e as IndexedEvent).time !== 'number') throw CORRUPT;
  return e as IndexedEvent;
}

/** Read a megabyte of records at a time (~35,000 events): a server replaying the file still answers requests between reads. */
const CHUNK = 1024 * 1024;

export interface IndexFileRead {
  /** Bytes of events.jsonl the index file covered (read from the events file from there on). */
  readonly covered: number;
  /** Bytes of the index file holding whole records up to there. */
  readonly validBytes: number;
}

/**
 * Reads an index file into `index` (or, without one, only finds where its records end), for an
 * events.jsonl of `limit` bytes. `onGap(from, to)` indexes a stretch the file has no records for;
 * `onProgress` gets the bytes of events.jsonl covered so far, once per read. Undefined when the
 * file is not an index (no magic: not written by this version).
 */
export async function readIndexFile(
  file: FileHandle,
  index: RunIndex<number> | undefined,
  limit: number,
  hooks: { readonly onGap?: (from: number, to: number) => Promise<void>; readonly onProgress?: (covered: number) => void } = {},
): Promise<IndexFileRead | undefined> {
  const magic = Buffer.alloc(INDEX_MAGIC.length);
  const { bytesRead } = await file.read(magic, 0, magic.length, 0);
  if (bytesRead < magic.length || !magic.equals(INDEX_MAGIC)) return undefined;
  const replay = new IndexReplay(index, limit);
  let pos = magic.length;
  let buffer = Buffer.allocUnsafe(CHUNK);
  let kept = 0;
  for (;;) {
    // A torn record at the end of the last read is moved to the front of the buffer, and read on from there.
    if (kept === buffer.length) buffer = Buffer.concat([buffer, Buffer.allocUnsafe(buffer.length)]);
    const read = (await file.read(buffer, kept, buffer.length - kept, pos)).bytesRead;
    pos += read;
    const end = kept + read;
    let at = 0;
    for (;;) {
      at += replay.replay(buffer.subarray(at, end));
      if (replay.gap === 0) break;
      await hooks.onGap?.(replay.offset, replay.offset + replay.gap);
      replay.skipGap();
    }
    hooks.onProgress?.(replay.offset);
    if (replay.stopped || read === 0) return { covered: replay.offset, validBytes: pos - (end - at) };
    kept = buffer.copy(buffer, 0, at, end);
  }
}

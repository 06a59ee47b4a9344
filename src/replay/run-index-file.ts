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
 * Layout: the magic `AGENTIX1`, then records, each a kind byte and its fields. Integers are
 * unsigned LEB128 varints, numbers float64 little-endian (NaN: none), strings either interned
 * (a `STRING` record defines the next id; names of actions, sources, statuses: few and reused) or
 * inline (length + UTF-8: trace ids, which are unique). A trace is referred to by its ordinal
 * among the `DISPATCHED` records (counted back from the latest) while the writer knows it, by its
 * id after that. `RESET` (a resumed run) starts the ids and ordinals again; `GAP n` says that the
 * next n bytes of events.jsonl have no records (written before the index, or lost in a crash) and
 * are read from the events file itself.
 */
import type { FileHandle } from 'node:fs/promises';
import type { RewardStatus } from '../events/env-events.js';
import type { RunEvent } from '../events/run-events.js';
import type { IndexedEvent, RunIndex, TraceRow } from './run-index.js';

export const INDEX_MAGIC = Buffer.from('AGENTIX1', 'latin1');

const enum Kind {
  STRING = 0,
  RESET = 1,
  GAP = 2,
  EVENT = 3,
  REF = 4,
  DISPATCHED = 5,
  TOOL_FINISHED = 6,
  SETTLED = 7,
  REWARD = 8,
  EPISODE_STARTED = 9,
  EPISODE_FINISHED = 10,
}

/** Event types the index reads in detail (the others are only counted and attributed: `REF`). */
const DETAILED = new Set(['run_started', 'run_finished', 'episode_started', 'episode_finished', 'dispatched', 'tool_finished', 'error', 'trace_settled', 'reward_expected', 'reward_arrived', 'reward_late', 'reward_imputed', 'reward_failed']);
/** Fields no index reads and that make most of an event's bytes. */
const BULKY = new Set(['params', 'observation', 'patch', 'available_actions', 'event_seq']);
/** Names interned at most: past that (a run inventing action names), events are kept whole. */
const MAX_STRINGS = 4096;

type Attribution = number | null | undefined;

interface RewardEntryLike {
  readonly status: string;
  readonly value: number | null;
  readonly delay_ms: number | null;
  readonly deadline_at?: number;
}

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isNumberOrNull = (v: unknown): v is number | null => v === null || typeof v === 'number';

/**
 * Encodes the records of the events the run writer writes. State is bounded by what is in
 * flight: the traces dispatched and not yet settled, and each instance's current episode.
 */
export class IndexEncoder {
  #buf = Buffer.allocUnsafe(64 * 1024);
  #pos = 0;
  #time = 0;
  readonly #strings = new Map<string, number>();
  /** Traces dispatched and not settled: their episode and ordinal. */
  readonly #inflight = new Map<string, { readonly episode: number; readonly ordinal: number }>();
  readonly #current = new Map<string, number>();
  #ordinals = 0;

  /** Starts a fresh index (the magic), or resumes one (`RESET`); then a `GAP` over the events it lacks. */
  constructor(options: { readonly resume?: boolean; readonly gap?: number } = {}) {
    if (!options.resume) {
      INDEX_MAGIC.copy(this.#buf, 0);
      this.#pos = INDEX_MAGIC.length;
    } else this.#byte(Kind.RESET);
    if (options.gap) {
      this.#byte(Kind.GAP);
      this.#uint(options.gap);
    }
  }

  /** Bytes encoded and not taken yet. */
  get pending(): number {
    return this.#pos;
  }

  /** The bytes encoded since the last call (undefined when none). */
  take(): Buffer | undefined {
    if (this.#pos === 0) return undefined;
    const out = Buffer.from(this.#buf.subarray(0, this.#pos));
    this.#pos = 0;
    return out;
  }

  /** The record of an event whose line in events.jsonl is `bytes` long (newline included). */
  add(e: RunEvent, bytes: number): void {
    const event = e as unknown as IndexedEvent;
    const { type, time } = event;
    const dt = time - this.#time;
    this.#time = time;
    if (!(Number.isSafeInteger(dt) && dt >= 0 && this.#compact(type, event, bytes, dt))) this.#whole(event, bytes);
    if (type === 'episode_started') {
      const { instance_id: instanceId, episode } = event;
      if (typeof instanceId === 'string' && typeof episode === 'number') this.#current.set(instanceId, episode);
    } else if (type === 'trace_settled') this.#inflight.delete(event['trace_id'] as string);
  }

  /**
   * Writes the compact record of `e`, or returns false when it has none (kept whole instead).
   * Everything is checked, and every name interned (its `STRING` record written), before the
   * record's first byte: a record is never left half written. Each type reads its own fields in
   * a method of its own: events of many shapes through one property read cost several times more.
   */
  #compact(type: string, e: IndexedEvent, bytes: number, dt: number): boolean {
    switch (type) {
      case 'dispatched':
        return this.#dispatched(e, bytes, dt);
      case 'tool_finished':
        return this.#toolFinished(e, bytes, dt);
      case 'trace_settled':
        return this.#settled(e, bytes, dt);
      case 'reward_expected':
      case 'reward_arrived':
      case 'reward_late':
        return this.#reward(type, e, bytes, dt);
      case 'episode_started':
      case 'episode_finished':
        return this.#episode(type, e, bytes, dt);
      case 'tool_started':
      case 'state_committed':
        return this.#ref(bytes, dt, this.#episodeOf(e['episode'], e['trace_id'], e['instance_id']));
      case 'lifecycle_changed':
        return this.#ref(bytes, dt, this.#episodeOf(e['episode'], e['trace_id'], e['instance_id']));
      default:
        return !DETAILED.has(type) && this.#ref(bytes, dt, this.#episodeOf(e['episode'], e['trace_id'], e['instance_id']));
    }
  }

  /** The episode the index will join an event to, as `RunIndex.episodeOf` would; undefined when only the index can tell. */
  #episodeOf(episode: unknown, traceId: unknown, instanceId: unknown): Attribution {
    if (typeof episode === 'number') return isCount(episode) ? episode : undefined;
    if (typeof traceId === 'string') return this.#inflight.get(traceId)?.episode;
    if (typeof instanceId === 'string') return this.#current.get(instanceId);
    return null;
  }

  #ref(bytes: number, dt: number, episode: Attribution): boolean {
    if (episode === undefined) return false;
    this.#head(Kind.REF, bytes, dt, episode);
    return true;
  }

  #dispatched(e: IndexedEvent, bytes: number, dt: number): boolean {
    const { trace_id: traceId, action, episode } = e;
    if (typeof traceId !== 'string' || typeof action !== 'string' || !isCount(episode)) return false;
    const actionId = this.#string(action);
    if (actionId < 0) return false;
    this.#head(Kind.DISPATCHED, bytes, dt, episode);
    this.#text(traceId);
    this.#uint(actionId);
    this.#inflight.set(traceId, { episode, ordinal: this.#ordinals++ });
    return true;
  }

  #toolFinished(e: IndexedEvent, bytes: number, dt: number): boolean {
    const { trace_id: traceId, attempts } = e;
    const episode = this.#episodeOf(e['episode'], traceId, e['instance_id']);
    if (episode === undefined || typeof traceId !== 'string' || !isCount(attempts)) return false;
    this.#head(Kind.TOOL_FINISHED, bytes, dt, episode);
    this.#trace(traceId);
    this.#uint(attempts);
    return true;
  }

  #reward(type: string, e: IndexedEvent, bytes: number, dt: number): boolean {
    const { trace_id: traceId, episode, step, source, key } = e;
    // The index joins a reward to the episode it names: one that names none is kept whole.
    if (typeof traceId !== 'string' || !isCount(episode) || !isCount(step) || typeof source !== 'string' || !(key === undefined || typeof key === 'string')) return false;
    // `key` absent and `key: ''` are the same to the index: it only asks whether a reward is the tool's own.
    const typeId = this.#string(type);
    const sourceId = this.#string(source);
    const keyId = this.#string(key ?? '');
    if (typeId < 0 || sourceId < 0 || keyId < 0) return false;
    this.#head(Kind.REWARD, bytes, dt, episode);
    this.#trace(traceId);
    this.#uint(typeId);
    this.#uint(sourceId);
    this.#uint(keyId);
    this.#uint(step);
    this.#number(e['value']);
    this.#number(e['delay_ms']);
    this.#number(e['deadline_at']);
    return true;
  }

  #episode(type: string, e: IndexedEvent, bytes: number, dt: number): boolean {
    const episode = e['episode'];
    if (!isCount(episode)) return false;
    if (type === 'episode_started') {
      const { instance_id: instanceId, initial_state_id: stateId } = e;
      const instanceName = typeof instanceId === 'string' ? this.#string(instanceId) : -1;
      const stateName = typeof stateId === 'string' ? this.#string(stateId) : -1;
      if (instanceName < 0 || stateName < 0) return false;
      this.#head(Kind.EPISODE_STARTED, bytes, dt, episode);
      this.#uint(instanceName);
      this.#uint(stateName);
      return true;
    }
    const { steps, reward, reason } = e;
    const reasonId = e['error'] === undefined && isCount(steps) && (reward === undefined || typeof reward === 'number') && typeof reason === 'string' ? this.#string(reason) : -1;
    if (reasonId < 0) return false;
    this.#head(Kind.EPISODE_FINISHED, bytes, dt, episode);
    this.#uint(steps as number);
    this.#number(reward);
    this.#uint(reasonId);
    return true;
  }

  #settled(e: IndexedEvent, bytes: number, dt: number): boolean {
    const { trace_id: traceId, step, status, duration_ms: duration, rewards } = e;
    const episode = this.#episodeOf(e['episode'], traceId, e['instance_id']);
    if (episode === undefined || typeof traceId !== 'string' || e['error'] !== undefined || !isCount(step) || typeof status !== 'string' || !(duration === undefined || typeof duration === 'number')) return false;
    if (typeof rewards !== 'object' || rewards === null || Array.isArray(rewards)) return false;
    const entries = rewards as Readonly<Record<string, RewardEntryLike | null>>;
    const statusId = this.#string(status);
    if (statusId < 0) return false;
    // Checked and interned in a first pass, written in a second (the ids are then known).
    let n = 0;
    for (const source in entries) {
      const r = entries[source];
      if (typeof r !== 'object' || r === null || typeof r.status !== 'string' || !isNumberOrNull(r.value) || !isNumberOrNull(r.delay_ms) || !(r.deadline_at === undefined || typeof r.deadline_at === 'number')) return false;
      if (this.#string(source) < 0 || this.#string(r.status) < 0) return false;
      n++;
    }
    this.#head(Kind.SETTLED, bytes, dt, episode);
    this.#trace(traceId);
    this.#uint(statusId);
    this.#uint(step);
    this.#number(duration);
    this.#uint(n);
    for (const source in entries) {
      const r = entries[source] as RewardEntryLike;
      this.#uint(this.#string(source));
      this.#uint(this.#string(r.status));
      this.#number(r.value);
      this.#number(r.delay_ms);
      this.#number(r.deadline_at);
    }
    return true;
  }

  #whole(e: IndexedEvent, bytes: number): void {
    const kept: Record<string, unknown> = {};
    for (const key in e) if (!BULKY.has(key)) kept[key] = e[key];
    this.#byte(Kind.EVENT);
    this.#uint(bytes);
    this.#text(JSON.stringify(kept));
  }

  #head(kind: Kind, bytes: number, dt: number, episode: number | null): void {
    this.#byte(kind);
    this.#uint(bytes);
    this.#uint(dt);
    this.#uint(episode === null ? 0 : episode + 1);
  }

  /** The trace an event is about: its ordinal back from the latest while in flight, else 0 and its id. */
  #trace(traceId: string): void {
    const known = this.#inflight.get(traceId);
    if (known) this.#uint(this.#ordinals - known.ordinal);
    else {
      this.#uint(0);
      this.#text(traceId);
    }
  }

  /** The id of an interned name, writing its `STRING` record the first time; -1 past MAX_STRINGS. */
  #string(s: string): number {
    let id = this.#strings.get(s);
    if (id === undefined) {
      if (this.#strings.size >= MAX_STRINGS) return -1;
      id = this.#strings.size;
      this.#strings.set(s, id);
      this.#byte(Kind.STRING);
      this.#text(s);
    }
    return id;
  }

  #room(n: number): void {
    if (this.#pos + n <= this.#buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#pos + n));
    this.#buf.copy(bigger, 0, 0, this.#pos);
    this.#buf = bigger;
  }

  #byte(b: number): void {
    this.#room(1);
    this.#buf[this.#pos++] = b;
  }

  #uint(n: number): void {
    this.#room(8);
    const buf = this.#buf;
    let pos = this.#pos;
    // Past 31 bits (an absolute time) by division; below, with the integer ops the engine does fastest.
    for (; n >= 0x80000000; n = Math.floor(n / 0x80)) buf[pos++] = (n % 0x80) | 0x80;
    for (; n >= 0x80; n >>>= 7) buf[pos++] = (n & 0x7f) | 0x80;
    buf[pos++] = n;
    this.#pos = pos;
  }

  #number(v: unknown): void {
    this.#room(8);
    this.#buf.writeDoubleLE(typeof v === 'number' ? v : Number.NaN, this.#pos);
    this.#pos += 8;
  }

  #text(s: string): void {
    const n = s.length;
    // A short ASCII string (a trace id) byte by byte: Buffer#write costs more than the copy of a few bytes.
    if (n < 0x80) {
      this.#room(n + 1);
      const buf = this.#buf;
      let pos = this.#pos + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[pos++] = c;
      }
      if (i === n) {
        buf[this.#pos] = n;
        this.#pos = pos;
        return;
      }
    }
    const bytes = Buffer.byteLength(s);
    this.#uint(bytes);
    this.#room(bytes);
    this.#pos += this.#buf.write(s, this.#pos, 'utf8');
  }
}

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
  readonly #fields: { value?: number; delay_ms?: number; deadline_at?: number } = {};
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
        index?.toolFinished(typeof trace === 'string' ? index.traces.get(trace) : trace, attempts);
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
    const row = typeof trace === 'string' ? index?.traces.get(trace) : trace;
    if (index && row && index.settle(row, time, status, step, duration, undefined)) {
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

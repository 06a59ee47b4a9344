/**
 * The writing side of `events.index` (the format: run-index-file.ts): the run writer hands each
 * event and its line's length to an {@link IndexEncoder} and writes what it encodes.
 */
import type { RunEvent } from '../events/run-events.js';
import type { IndexedEvent } from './run-index.js';
import { INDEX_MAGIC, Kind } from './run-index-file.js';

/** Event types the index reads in detail (the others are only counted and attributed: `REF`). */
const DETAILED = new Set(['run_started', 'run_finished', 'episode_started', 'episode_finished', 'dispatched', 'tool_finished', 'error', 'trace_settled', 'reward_expected', 'reward_arrived', 'reward_late', 'reward_imputed', 'reward_failed']);
/** Fields no index reads and that make most of an event's bytes. */
const BULKY = new Set(['params', 'observation', 'patch', 'available_actions', 'event_seq']);
/** Names interned at most: past that (a run inventing action names), events are kept whole. */
const MAX_STRINGS = 4096;
/** Traces known at most (a source whose rewards never come must not grow it): past that, the oldest is forgotten. */
const MAX_KNOWN = 1 << 16;
/** Reward events that settle a source's value for a step. */
const RESOLVING = new Set(['reward_arrived', 'reward_late', 'reward_imputed', 'reward_failed']);

/** A trace the encoder refers to by ordinal: `waiting` counts the sources still pending once it settled (-1 before). */
interface KnownTrace {
  readonly episode: number;
  readonly ordinal: number;
  waiting: number;
}

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
 * flight: the traces not settled or with rewards still pending, and each instance's current episode.
 */
export class IndexEncoder {
  #buf = Buffer.allocUnsafe(64 * 1024);
  #pos = 0;
  #time = 0;
  readonly #strings = new Map<string, number>();
  /**
   * Traces dispatched and not settled, or settled with rewards still to come: a delayed reward then
   * names its trace by ordinal, which spares the reader decoding and hashing its id.
   */
  readonly #traces = new Map<string, KnownTrace>();
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
    } else if (type === 'trace_settled' || RESOLVING.has(type)) this.#forget(type, event);
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
    if (typeof traceId === 'string') return this.#traces.get(traceId)?.episode;
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
    this.#remember(traceId, episode);
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
    this.#number(e['reward']);
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
    this.#number(e['reward']);
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

  #remember(traceId: string, episode: number): void {
    this.#traces.set(traceId, { episode, ordinal: this.#ordinals++, waiting: -1 });
    if (this.#traces.size > MAX_KNOWN) this.#traces.delete(this.#traces.keys().next().value as string);
  }

  /** After a trace's settle or one of its rewards: forgotten once nothing more is expected of it. */
  #forget(type: string, e: IndexedEvent): void {
    const traceId = e['trace_id'] as string;
    const known = this.#traces.get(traceId);
    if (!known) return;
    if (type === 'trace_settled') {
      let waiting = 0;
      const rewards = e['rewards'] as Readonly<Record<string, { readonly status?: unknown } | null>> | undefined;
      for (const source in rewards) if (rewards[source]?.status === 'pending') waiting++;
      known.waiting = waiting;
    } else if (known.waiting > 0) known.waiting--;
    if (known.waiting === 0) this.#traces.delete(traceId);
  }

  /** The trace an event is about: its ordinal back from the latest while known, else 0 and its id. */
  #trace(traceId: string): void {
    const known = this.#traces.get(traceId);
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

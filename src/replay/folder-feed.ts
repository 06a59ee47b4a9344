/**
 * A run folder as a debug feed. `events.jsonl` is indexed in one pass of large reads, keeping
 * only byte offsets for each episode's events; the bulky events (commits with their patches,
 * lifecycle changes, tool starts) are not even parsed, only attributed to their episode from
 * the line's first bytes. A folder still being written is followed: new bytes are indexed as
 * they land (a torn last line waits for its end), until the run says it finished.
 */
import { existsSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { episodeCommits, historyOf, type DebugFeed, type EpisodeHistory, type FeedStatus } from './debug-feed.js';
import { RunIndex, type IndexedEvent } from './run-index.js';
import { readIndexFile } from './run-index-file.js';
import { forEachLine, readManifest, RecordReading } from './run-rewards.js';
import { rewardEvent, type RewardLogRecord } from './reward-log.js';
import { RUN_FILES } from './run-writer.js';

const CHUNK = 1024 * 1024;
/** Events the index needs no detail of: found again by offset when a pane asks. */
const REFERENCE_ONLY = new Set(['state_committed', 'tool_started', 'lifecycle_changed', 'loop_blocked', 'loop_lag']);
const TYPE_KEY = Buffer.from('"type":"');
/** The keys that attribute an event to its episode come first in every line (after event_seq, type, time). */
const HEAD = /"time":([\d.]+),"instance_id":"([^"\\]*)"(?:,"trace_id":"([^"\\]*)")?/;
/**
 * The two most frequent detailed events, read from the line's head without parsing the rest (a
 * million-event folder spends most of its open in JSON.parse otherwise). Anchored on the whole
 * head the core writes; a line that does not match exactly (another writer's key order, an
 * escaped id) is parsed whole instead, so the fast path can only be skipped, never wrong.
 */
const STR = '"((?:[^"\\\\]|\\\\.)*)"';
const NUM = '(-?[\\d.eE+-]+)';
const REWARD_HEAD = new RegExp(`^\\{"event_seq":\\d+,"type":"reward_(arrived|late)","time":${NUM},"instance_id":${STR},"trace_id":${STR},"episode":(\\d+),"step":(\\d+),"source":${STR},"value":${NUM},"key":${STR},"delay_ms":${NUM}(?:,"reward":${NUM})?[,}]`);
const SETTLED_HEAD = new RegExp(
  `^\\{"event_seq":\\d+,"type":"trace_settled","time":${NUM},"instance_id":${STR},"trace_id":${STR},"episode":(\\d+),"step":(\\d+),"action":${STR},"seq_before":\\d+,"status":"(resolved|failed)","reward":${NUM},"done":(?:true|false),"seq":\\d+,"duration_ms":${NUM},`,
);
const DISPATCHED_HEAD = new RegExp(`^\\{"event_seq":\\d+,"type":"dispatched","time":${NUM},"instance_id":${STR},"trace_id":${STR},"action":${STR},"episode":(\\d+),`);
const FINISHED_HEAD = new RegExp(`^\\{"event_seq":\\d+,"type":"tool_finished","time":${NUM},"instance_id":${STR},"trace_id":${STR},"tool":${STR},"ok":(?:true|false),"duration_ms":${NUM},"attempts":(\\d+)[,}]`);
const REWARDS_KEY = '"rewards":{';
const ERROR_KEY = Buffer.from('"error":{');

/** The end (exclusive) of the JSON object that opens at `from`, skipping strings. */
function objectEnd(text: string, from: number): number {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      for (i++; i < text.length && text.charCodeAt(i) !== 34; i++) if (text.charCodeAt(i) === 92) i++;
    } else if (c === 123 || c === 91) depth++;
    else if ((c === 125 || c === 93) && --depth === 0) return i + 1;
  }
  return -1;
}

/** The most frequent events from their heads, or undefined when the line is not in the core's exact shape. */
function fastEvent(type: string, line: string, hasError: boolean): IndexedEvent | undefined {
  if (type === 'dispatched') {
    const m = DISPATCHED_HEAD.exec(line);
    if (!m || m[3]?.includes('\\') || m[4]?.includes('\\')) return undefined;
    return { type, time: Number(m[1]), instance_id: m[2], trace_id: m[3], action: m[4], episode: Number(m[5]) };
  }
  if (type === 'tool_finished') {
    const m = FINISHED_HEAD.exec(line);
    if (!m || m[3]?.includes('\\')) return undefined;
    return { type, time: Number(m[1]), instance_id: m[2], trace_id: m[3], attempts: Number(m[6]) };
  }
  if (type === 'reward_arrived' || type === 'reward_late') {
    const m = REWARD_HEAD.exec(line);
    if (!m || line.includes('\\')) return undefined;
    return { type, time: Number(m[2]), instance_id: m[3], trace_id: m[4], episode: Number(m[5]), step: Number(m[6]), source: m[7], value: Number(m[8]), key: m[9], delay_ms: Number(m[10]), ...(m[11] !== undefined ? { reward: Number(m[11]) } : {}) };
  }
  // A failed step's error can hold any JSON (an offending value): those lines are parsed whole.
  if (type !== 'trace_settled' || hasError) return undefined;
  const m = SETTLED_HEAD.exec(line);
  if (!m || m[3]?.includes('\\') || m[4]?.includes('\\')) return undefined;
  // The last "rewards" key is the top-level one: params and the observation come before it.
  const at = line.lastIndexOf(REWARDS_KEY);
  const end = at === -1 ? -1 : objectEnd(line, at + REWARDS_KEY.length - 1);
  if (end === -1) return undefined;
  return {
    type,
    time: Number(m[1]),
    instance_id: m[2],
    trace_id: m[3],
    episode: Number(m[4]),
    step: Number(m[5]),
    action: JSON.parse(`"${m[6]}"`) as string,
    status: m[7],
    reward: Number(m[8]),
    duration_ms: Number(m[9]),
    rewards: JSON.parse(line.slice(at + REWARDS_KEY.length - 1, end)) as unknown,
  };
}

/** The lines of a file (0 when it is missing), counted in 1 MB reads without decoding them. */
async function countLines(file: string): Promise<number> {
  let handle: FileHandle;
  try {
    handle = await open(file, 'r');
  } catch {
    return 0;
  }
  try {
    const buffer = Buffer.allocUnsafe(1 << 20);
    let lines = 0;
    for (let pos = 0; ; ) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, pos);
      if (bytesRead === 0) return lines;
      for (let i = buffer.indexOf(10, 0); i !== -1 && i < bytesRead; i = buffer.indexOf(10, i + 1)) lines++;
      pos += bytesRead;
    }
  } finally {
    await handle.close();
  }
}

export interface FolderFeedOptions {
  /** Keep reading what the run appends (default: true). */
  readonly follow?: boolean;
  /** How often a followed folder is checked for new lines (default 250 ms). */
  readonly pollMs?: number;
}

export class FolderFeed implements DebugFeed {
  readonly title: string;
  readonly index = new RunIndex<number>();
  readonly #dir: string;
  readonly #file: FileHandle;
  readonly #listeners = new Set<() => void>();
  readonly #states = new Map<string, JsonValue>();
  readonly #follow: boolean;
  readonly #pollMs: number;
  #status: FeedStatus = { phase: 'indexing', progress: 0 };
  /** Offset of the first byte not yet indexed, and the torn line before it. */
  #pos = 0;
  #carry: Buffer = Buffer.alloc(0);
  #timer: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  #closed = false;

  private constructor(dir: string, file: FileHandle, options: FolderFeedOptions) {
    this.#dir = dir;
    this.title = dir;
    this.#file = file;
    this.#follow = options.follow ?? true;
    this.#pollMs = options.pollMs ?? 250;
  }

  /** Opens the folder and indexes what is there; `ready` resolves when that first pass is done. */
  static async open(dir: string, options: FolderFeedOptions = {}): Promise<FolderFeed> {
    await readManifest(dir);
    let file: FileHandle;
    try {
      file = await open(path.join(dir, RUN_FILES.events), 'r');
    } catch (err) {
      throw new AgentError('BAD_USAGE', `'${dir}' has no readable ${RUN_FILES.events} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { hint: 'Pass a folder written by `agent run`.' });
    }
    const feed = new FolderFeed(dir, file, options);
    feed.#reading = feed.#readMore();
    return feed;
  }

  /** Resolves once everything written so far is indexed. */
  async ready(): Promise<void> {
    await this.#reading;
  }

  status(): FeedStatus {
    return this.#status;
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #changed(): void {
    for (const l of this.#listeners) l();
  }

  async #readMore(): Promise<void> {
    const size = (await this.#file.stat()).size;
    if (this.#pos === 0 && this.index.events === 0) await this.#readIndexFile(size);
    await this.#scan(size);
    if (this.#closed) return;
    const finished = this.index.run?.status !== undefined && this.index.run.status !== 'running';
    this.#status = { phase: finished || !this.#follow || existsSync(path.join(this.#dir, RUN_FILES.summary)) ? 'finished' : 'following' };
    if (this.#status.phase === 'finished') await this.#laterRewards();
    this.#changed();
    if (this.#status.phase === 'following') {
      this.#timer = setTimeout(() => {
        this.#reading = this.#readMore().catch((err: unknown) => {
          this.#status = { phase: 'finished', error: (err as Error).message };
          this.#changed();
        });
      }, this.#pollMs);
    }
  }

  /** Indexes events.jsonl from `#pos` up to byte `end`, a large read at a time. */
  async #scan(end: number): Promise<void> {
    const buffer = Buffer.allocUnsafe(CHUNK);
    while (this.#pos < end && !this.#closed) {
      const { bytesRead } = await this.#file.read(buffer, 0, Math.min(CHUNK, end - this.#pos), this.#pos);
      if (bytesRead === 0) break;
      const start = this.#pos - this.#carry.length;
      const chunk = this.#carry.length > 0 ? Buffer.concat([this.#carry, buffer.subarray(0, bytesRead)]) : buffer.subarray(0, bytesRead);
      this.#pos += bytesRead;
      const used = this.#indexLines(chunk, start);
      this.#carry = Buffer.from(chunk.subarray(used));
      this.#progress(this.#pos, end);
    }
  }

  #progress(at: number, size: number): void {
    if (this.#status.phase === 'indexing') this.#status = { phase: 'indexing', progress: size === 0 ? 1 : at / size };
    this.#changed();
  }

  /**
   * The run writer's index of events.jsonl (events.index), when there is one: replayed instead of
   * reading the events it covers; a stretch it has no records for is read from the events file.
   */
  async #readIndexFile(size: number): Promise<void> {
    let file: FileHandle;
    try {
      file = await open(path.join(this.#dir, RUN_FILES.index), 'r');
    } catch {
      return;
    }
    try {
      const read = await readIndexFile(file, this.index, size, {
        onGap: async (from, to) => {
          this.#pos = from;
          this.#carry = Buffer.alloc(0);
          await this.#scan(to);
        },
        onProgress: (covered) => this.#progress(covered, size),
      });
      if (read) this.#pos = read.covered;
      // A gap ends on a line's end: nothing of it is carried into the lines after the index's.
      this.#carry = Buffer.alloc(0);
    } finally {
      await file.close();
    }
  }

  /** Values delivered after the run (`agent reward` on the folder) are only in the reward log: onto their steps. */
  async #laterRewards(): Promise<void> {
    // The reward log repeats the reward events the event log has: read it (parsing every line) only
    // when it holds more or other lines than that, which only a delivery after the run makes.
    if ((await countLines(path.join(this.#dir, RUN_FILES.rewards))) === this.index.loggedRewards) return;
    await forEachLine(path.join(this.#dir, RUN_FILES.rewards), (r) => void this.index.laterReward(rewardEvent(r as unknown as RewardLogRecord) as unknown as IndexedEvent), { reading: new RecordReading(true) });
  }

  /** Indexes the complete lines of `chunk` (which starts at file offset `start`); returns the bytes used. */
  #indexLines(chunk: Buffer, start: number): number {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl !== -1; from = nl + 1, nl = chunk.indexOf(10, from)) {
      if (nl === from) continue;
      const offset = start + from;
      const t = chunk.indexOf(TYPE_KEY, from);
      const typeEnd = t === -1 || t > nl ? -1 : chunk.indexOf(34, t + TYPE_KEY.length);
      const type = typeEnd === -1 ? '' : chunk.toString('latin1', t + TYPE_KEY.length, typeEnd);
      if (REFERENCE_ONLY.has(type)) {
        const head = HEAD.exec(chunk.toString('latin1', typeEnd, Math.min(nl, typeEnd + 240)));
        if (head) {
          this.index.reference({ type, time: Number(head[1]), instance_id: head[2], ...(head[3] !== undefined ? { trace_id: head[3] } : {}) }, offset);
          continue;
        }
      }
      const line = chunk.toString('utf8', from, nl);
      let event: IndexedEvent | undefined;
      try {
        event = fastEvent(type, line, type === 'trace_settled' && chunk.subarray(typeEnd, nl).includes(ERROR_KEY)) ?? (JSON.parse(line) as IndexedEvent);
      } catch {
        // A torn line (a run killed mid-write) is skipped: everything around it still reads.
        continue;
      }
      this.index.ingest(event, offset);
    }
    return from;
  }

  async episodeEvents(episode: number, signal?: AbortSignal): Promise<readonly IndexedEvent[]> {
    const row = this.index.episodes.get(episode);
    if (!row) throw new AgentError('BAD_USAGE', `no episode ${episode} in ${this.#dir}`, { hint: 'Episodes are numbered from 0: see episodes.jsonl.' });
    const out: IndexedEvent[] = [];
    let buffer = Buffer.allocUnsafe(16 * 1024);
    for (const offset of row.refs) {
      signal?.throwIfAborted();
      // Lines are read whole: a line longer than the buffer doubles it and reads again.
      for (;;) {
        const { bytesRead } = await this.#file.read(buffer, 0, buffer.length, offset);
        const nl = buffer.subarray(0, bytesRead).indexOf(10);
        if (nl === -1 && bytesRead === buffer.length) {
          buffer = Buffer.allocUnsafe(buffer.length * 2);
          continue;
        }
        out.push(JSON.parse(buffer.toString('utf8', 0, nl === -1 ? bytesRead : nl)) as IndexedEvent);
        break;
      }
    }
    return out;
  }

  async episodeHistory(episode: number, signal?: AbortSignal): Promise<EpisodeHistory> {
    const events = await this.episodeEvents(episode, signal);
    const row = this.index.episodes.get(episode);
    if (!row) throw new AgentError('BAD_USAGE', `no episode ${episode} in ${this.#dir}`);
    const initial = await this.#initialState(row.initialStateId);
    return historyOf(episode, row.instanceId, initial, await episodeCommits(this.#dir, row.instanceId, events));
  }

  async #initialState(stateId: string): Promise<JsonValue> {
    if (!this.#states.has(stateId)) {
      await forEachLine(path.join(this.#dir, RUN_FILES.states), (r) => {
        if (typeof r['state_id'] === 'string' && !this.#states.has(r['state_id'])) this.#states.set(r['state_id'], r['state'] as JsonValue);
      });
    }
    const state = this.#states.get(stateId);
    if (state === undefined) throw new AgentError('STATE_CORRUPT', `${RUN_FILES.states} has no ${stateId}`, { hint: 'The run folder is incomplete: was it copied while the run was starting?' });
    return state;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#listeners.clear();
    await this.#reading?.catch(() => undefined);
    await this.#file.close();
  }
}

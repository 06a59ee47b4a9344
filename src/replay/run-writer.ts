/**
 * Writes a run folder `<out>/<run-id>/`:
 * - `run.json`: the run's config and its reward sources' contracts (what `agent reward` and
 *   `agent export` need to work on the folder after the process has gone);
 * - `events.jsonl`: every event, in order;
 * - `trajectories.jsonl`: one record per settled step, with its rewards per source as they stood then;
 * - `rewards.jsonl`: the append-only reward log (every later change to a delayed reward);
 * - `states.jsonl`: each distinct initial state, once; `episodes.jsonl`: each finished episode,
 *   with its final state as a JSON Patch from its initial one;
 * - `events.index`: the debug index's digest of events.jsonl (binary, see run-index-file.ts), so
 *   that `agent debug` opens a run of a million events without parsing them;
 * - `summary.json`, at the end.
 * Record shapes: the schemas in schemas/ (run-manifest, run-event, trajectory-record,
 * reward-log-record, state-record, episode-record, run-summary).
 */
import type { WriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { once } from 'node:events';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import { describeError, UsageError } from '../shared/errors.js';
import type { ErrorInfo, RewardEntry } from '../events/env-events.js';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { Patch } from '../state/patch.js';
import { isLoggedReward, rewardRecord, type RewardLogRecord } from './reward-log.js';
import { IndexEncoder } from './run-index-encoder.js';
import { readIndexFile } from './run-index-file.js';

/** The files of a run folder by role (trajectories.jsonl, episodes.jsonl, states.jsonl, rewards.jsonl, events.jsonl, run.json, summary.json). */
export const RUN_FILES = {
  manifest: 'run.json',
  events: 'events.jsonl',
  trajectories: 'trajectories.jsonl',
  rewards: 'rewards.jsonl',
  states: 'states.jsonl',
  episodes: 'episodes.jsonl',
  summary: 'summary.json',
  /** Binary: where each event of events.jsonl starts and what the debug index needs of it (run-index-file.ts). */
  index: 'events.index',
} as const;

/** Lines are batched up to this many characters per write. */
const BATCH_CHARS = 64 * 1024;
/**
 * …or for at most this long: a slow run (a 20 ms tool, a distributed run's coordinator, a served
 * session or two) would otherwise pay a write per log for every few events (a system call each on
 * the thread pool, most of a coordinator's CPU; at 10 ms a served 20 ms step cost ~15 % more CPU).
 * Followers of the folder poll every 50 ms or more; a crash loses what the journal has anyway.
 */
const BATCH_MS = 50;
/**
 * The index goes out in larger pieces than the logs: a reader only replays it when it opens the
 * folder, and reads the events past where it ends, so lagging costs nothing but a write saved.
 */
const INDEX_BATCH_BYTES = 256 * 1024;

/** The logs, in the order they are opened. */
const LOGS = ['events', 'trajectories', 'rewards', 'states', 'episodes'] as const;
type LogName = (typeof LOGS)[number];

/** One line of states.jsonl: an initial state, written once however many episodes start from it. */
export interface StateRecord {
  readonly state_id: string;
  readonly state: JsonValue;
}

/** One line of episodes.jsonl. */
export interface EpisodeRecord {
  readonly episode: number;
  readonly instance_id: string;
  readonly initial_state_id: string;
  /** JSON Patch from the initial state to the final one. */
  readonly final_patch: Patch;
  readonly final_seq: number;
  readonly steps: number;
  readonly reason: string;
  /** The episode reached a terminal state: the env said done, no action was left, or the policy stopped. */
  readonly terminated: boolean;
  /** The episode was cut off: the step limit, an interruption or a policy error. */
  readonly truncated: boolean;
  readonly started_at: number;
  readonly finished_at: number;
}

/** One line of trajectories.jsonl: a settled step with what the policy saw and chose, the tool's result, its rewards and its end. */
export interface TrajectoryRecord {
  readonly run_id: string;
  readonly episode: number;
  readonly instance_id: string;
  readonly step: number;
  readonly trace_id: string;
  readonly time: number;
  readonly action: string;
  /** `user` when the env's other side made the call (τ²-bench telecom's phone); the agent's calls have none. */
  readonly actor?: 'user';
  readonly params: JsonObject;
  readonly status: 'resolved' | 'failed';
  /** The tool's observation. */
  readonly observation?: JsonValue;
  /** Σ weight × value of the rewards that had arrived when the step settled (delayed ones: see rewards.jsonl). */
  readonly reward: number;
  readonly rewards: Readonly<Record<string, RewardEntry>>;
  readonly done: boolean;
  /** Seq of the state the action was chosen on, and of the state the step produced. */
  readonly seq_before: number;
  readonly state_seq: number;
  readonly duration_ms: number;
  /** The actions the policy could choose from. */
  readonly available_actions?: readonly string[];
  readonly error?: ErrorInfo;
}

/**
 * `mkdir -p`, one level at a time: Node's recursive mkdir never returns for a path under /proc
 * (it retries the parent forever), and a user's `--out` may be anything.
 */
async function makeDirs(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; ; d = path.dirname(d)) {
    try {
      if ((await stat(d)).isDirectory()) break;
      throw Object.assign(new Error(`'${d}' is not a directory`), { code: 'ENOTDIR' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || path.dirname(d) === d) throw err;
      missing.unshift(d);
    }
  }
  for (const d of missing) {
    await mkdir(d).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
}

/**
 * An events log appended to after its process died: a torn last line (the kill came mid-write) is
 * cut off, so the next line starts on a line of its own; returns the last `event_seq` written, so
 * the numbering goes on instead of starting again at 1.
 */
async function continueEvents(handle: FileHandle): Promise<number> {
  const { size } = await handle.stat();
  let end = size;
  let tail = Buffer.alloc(0);
  // Back from the end, a chunk at a time, until the last whole line is in `tail` (lines can be long: a state patch).
  for (let chunk = 64 * 1024; end > 0; chunk *= 2) {
    const start = Math.max(0, end - chunk);
    const buf = Buffer.alloc(end - start);
    await handle.read(buf, 0, buf.length, start);
    tail = Buffer.concat([buf, tail]);
    end = start;
    const cut = tail.lastIndexOf(10);
    if (cut !== -1 && (tail.lastIndexOf(10, cut - 1) !== -1 || end === 0)) break;
  }
  const whole = tail.lastIndexOf(10) + 1;
  if (whole < tail.length) await handle.truncate(end + whole);
  const lines = tail.subarray(0, whole).toString('utf8').trimEnd().split('\n');
  const last = lines[lines.length - 1] ?? '';
  return Number(/^\{"event_seq":(\d+),/.exec(last)?.[1] ?? 0);
}

/**
 * An index file continued after its process died: records past the (cut) events log, and a torn
 * last record, are cut off; what the index lacks of the events log (a crash tore the index more
 * than the events, or the run predates the index) becomes a gap its readers read from the events.
 */
async function continueIndex(handle: FileHandle, eventsSize: number): Promise<IndexEncoder> {
  const read = await readIndexFile(handle, undefined, eventsSize);
  await handle.truncate(read?.validBytes ?? 0);
  return new IndexEncoder({ resume: read !== undefined, gap: eventsSize - (read?.covered ?? 0) });
}

/** Records the writer could not write: counted and reported, never dropped silently. */
export interface WriteLoss {
  readonly records: number;
  readonly reason: string;
}

export class RunWriter implements AsyncDisposable {
  readonly runId: string;
  readonly dir: string;
  readonly #logs: Record<LogName | 'index', WriteStream>;
  readonly #index: IndexEncoder;
  readonly #statesWritten = new Set<string>();
  #seq = 0;
  #closed = false;
  /** Lines not yet handed to their stream, flushed BATCH_MS after the first or past BATCH_CHARS. */
  #pending: Record<LogName, string[]> = { events: [], trajectories: [], rewards: [], states: [], episodes: [] };
  #pendingChars = 0;
  #flushTimer: NodeJS.Timeout | undefined;
  #draining: Promise<void> | undefined;
  #lost = 0;
  #lossReason = '';
  /** A resumed folder's rewritten logs: written beside their files (temp, final) until `rewritten()` puts them in place. */
  #rewrites: (readonly [string, string])[];

  /** `handles`: the logs', in LOGS order, then the index file's. */
  private constructor(runId: string, dir: string, handles: readonly FileHandle[], index: IndexEncoder, lastSeq = 0, rewrites: (readonly [string, string])[] = []) {
    this.runId = runId;
    this.#rewrites = rewrites;
    this.dir = dir;
    this.#seq = lastSeq;
    this.#logs = Object.fromEntries([...LOGS, 'index' as const].map((name, i) => [name, this.#stream(handles[i] as FileHandle, RUN_FILES[name])])) as Record<LogName | 'index', WriteStream>;
    this.#index = index;
    this.#writeIndex();
  }

  /**
   * Create `<outDir>/<runId>/`, write `run.json` and open the logs now, so that a bad `--out` (a
   * file in the path, no permission, a special file) is a usage error before anything runs, not a crash later.
   */
  static async create(outDir: string, runId: string, manifest: object = { run_id: runId }): Promise<RunWriter> {
    const dir = path.resolve(outDir, runId);
    const opened: FileHandle[] = [];
    try {
      await makeDirs(dir);
      await writeFile(path.join(dir, RUN_FILES.manifest), `${JSON.stringify(manifest, null, 2)}\n`, { flag: 'wx' });
      for (const name of [...LOGS, 'index' as const]) opened.push(await open(path.join(dir, RUN_FILES[name]), 'wx'));
    } catch (err) {
      await Promise.all(opened.map((h) => h.close()));
      const code = (err as NodeJS.ErrnoException).code;
      throw new UsageError(`cannot create the run folder '${dir}': ${code ?? describeError(err)}`, `Pass --out a folder you can write to (it is created if missing); ${code === 'ENOTDIR' ? 'a part of that path is a file' : code === 'EACCES' || code === 'EPERM' ? 'you have no permission there' : 'check the path'}.`);
    }
    return new RunWriter(runId, dir, opened, new IndexEncoder());
  }

  /**
   * Reopen a run folder to continue it (`agent run --resume`): run.json is replaced, summary.json
   * removed (the run is live again), events.jsonl appended to, and the other logs started afresh:
   * the caller rewrites them from the run's journal, which is what was committed, then calls
   * `rewritten()`. Until then the rewrite goes to files beside them: a reader never sees a log
   * emptied, and a resume that dies midway leaves the folder as it was.
   */
  static async reopen(outDir: string, runId: string, manifest: object, options: { readonly rewriteEvents?: boolean } = {}): Promise<RunWriter> {
    const dir = path.resolve(outDir, runId);
    const opened: FileHandle[] = [];
    try {
      await makeDirs(dir);
      const tmp = path.join(dir, `.${RUN_FILES.manifest}.tmp`);
      await writeFile(tmp, `${JSON.stringify(manifest, null, 2)}\n`);
      await rename(tmp, path.join(dir, RUN_FILES.manifest));
      await rm(path.join(dir, RUN_FILES.summary), { force: true });
      let lastSeq = 0;
      const rewrites: (readonly [string, string])[] = [];
      const rewrite = (file: string): Promise<FileHandle> => {
        const tmp = path.join(dir, `.${file}.rewrite`);
        rewrites.push([tmp, path.join(dir, file)]);
        return open(tmp, 'w');
      };
      for (const name of LOGS) {
        const append = name === 'events' && !options.rewriteEvents;
        const handle = append ? await open(path.join(dir, RUN_FILES[name]), 'a+') : await rewrite(RUN_FILES[name]);
        opened.push(handle);
        if (append) lastSeq = await continueEvents(handle);
      }
      const index = options.rewriteEvents ? await rewrite(RUN_FILES.index) : await open(path.join(dir, RUN_FILES.index), 'a+');
      opened.push(index);
      return new RunWriter(runId, dir, opened, options.rewriteEvents ? new IndexEncoder() : await continueIndex(index, (await (opened[0] as FileHandle).stat()).size), lastSeq, rewrites);
    } catch (err) {
      await Promise.all(opened.map((h) => h.close()));
      throw new UsageError(`cannot reopen the run folder '${dir}': ${(err as NodeJS.ErrnoException).code ?? describeError(err)}`, 'The run resumes into the folder it started in: check that it is still there and writable.');
    }
  }

  #stream(handle: FileHandle, name: string): WriteStream {
    const stream = handle.createWriteStream();
    stream.on('error', (err) => this.#lose(1, `writing ${name} failed: ${describeError(err)}`));
    return stream;
  }

  #lose(records: number, reason: string): void {
    this.#lost += records;
    this.#lossReason ||= reason;
  }

  /** Records that could not be written so far (undefined when none). */
  get loss(): WriteLoss | undefined {
    return this.#lost === 0 ? undefined : { records: this.#lost, reason: this.#lossReason };
  }

  /**
   * Resolves once every log has flushed below its buffer limit: the run waits here instead of
   * piling up records. Every waiter shares one wait (a run has hundreds of episodes calling this).
   */
  async drained(): Promise<void> {
    this.#flush();
    if (!this.needsDrain) return;
    this.#draining ??= Promise.all(Object.values(this.#logs).map((s) => (s.writableNeedDrain && !s.destroyed ? once(s, 'drain') : undefined))).then(
      () => {
        this.#draining = undefined;
      },
      () => {
        this.#draining = undefined;
      },
    );
    await this.#draining;
  }

  get needsDrain(): boolean {
    return this.#pendingChars > BATCH_CHARS || Object.values(this.#logs).some((s) => s.writableNeedDrain);
  }

  /** Hand the batched lines to the streams: one write per log instead of one per record. */
  #flush(): void {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    if (this.#pendingChars === 0) return;
    for (const name of LOGS) {
      const lines = this.#pending[name];
      if (lines.length === 0) continue;
      this.#logs[name].write(`${lines.join('\n')}\n`);
      this.#pending[name] = [];
    }
    this.#pendingChars = 0;
    if (this.#index.pending >= INDEX_BATCH_BYTES) this.#writeIndex();
  }

  /**
   * After the events it describes. The two files still land independently (two streams), so a
   * reader takes a record only once its event's line is in the events file.
   */
  #writeIndex(): void {
    const bytes = this.#index.take();
    if (bytes) this.#logs.index.write(bytes);
  }

  /** `text`: the event's JSON when the caller has it already (a durable run's journal wrote it, a thread sent it); `trajectory`: a step's trajectory record likewise. */
  write(event: RunEvent, text?: string, trajectory?: string): void {
    if (this.#closed) return;
    const seq = ++this.#seq;
    // The seq spliced in front of the event's own JSON: no copy of every event object to add a key.
    let json: string | undefined = text;
    try {
      json ??= JSON.stringify(event) as string | undefined;
      if (json === undefined) throw new TypeError('it serialises to nothing');
    } catch (err) {
      json = undefined;
      this.#lose(1, `event ${seq} (${event.type}) is not JSON: ${describeError(err)}`);
    }
    if (json !== undefined) {
      const head = `{"event_seq":${seq},`;
      this.#append('events', head + json.slice(1));
      // The line's UTF-8 length from its parts (ASCII head, the JSON less its '{', the newline): measuring
      // the joined line would make the engine copy it into one string first.
      this.#index.add(event, head.length + Buffer.byteLength(json));
    }
    if (event.type === 'trace_settled') {
      if (trajectory !== undefined) this.#append('trajectories', trajectory);
      else if (json !== undefined) this.#append('trajectories', trajectoryLine(this.runId, event, json));
      else this.writeStep(event);
    } else if (isLoggedReward(event)) this.#line('rewards', () => rewardRecord(event), `the reward log record of event ${seq}`);
  }

  /** A step's trajectory record (without its event: a resume rewriting what was committed). */
  writeStep(event: SettledStepEvent): void {
    if (!this.#closed) this.#line('trajectories', () => trajectoryRecord(this.runId, event), `the trajectory record of ${event.trace_id}`);
  }

  writeRewardRecord(record: RewardLogRecord): void {
    if (!this.#closed) this.#line('rewards', () => record, `a reward log record of ${record.trace_id}`);
  }

  /** An initial state, once per id. */
  writeState(stateId: string, state: JsonValue): void {
    if (this.#closed || this.#statesWritten.has(stateId)) return;
    this.#statesWritten.add(stateId);
    this.#line('states', () => ({ state_id: stateId, state }) satisfies StateRecord, `initial state ${stateId}`);
  }

  writeEpisode(record: EpisodeRecord): void {
    if (!this.#closed) this.#line('episodes', () => record, `the record of episode ${record.episode}`);
  }

  #line(log: LogName, record: () => object, what: string): void {
    let text: string;
    try {
      text = JSON.stringify(record());
    } catch (err) {
      this.#lose(1, `${what} is not JSON: ${describeError(err)}`);
      return;
    }
    this.#append(log, text);
  }

  #append(log: LogName, text: string): void {
    this.#pending[log].push(text);
    this.#pendingChars += text.length;
    if (this.#pendingChars > BATCH_CHARS) this.#flush();
    else this.#flushTimer ??= setTimeout(() => this.#flush(), BATCH_MS);
  }

  /**
   * A resumed folder's rewrite is complete: its logs, written beside the old ones, replace them
   * (each a rename, so a reader sees the old file or the whole new one); appends go on into them.
   */
  async rewritten(): Promise<void> {
    if (this.#rewrites.length === 0) return;
    this.#flush();
    // What was handed to the streams is in the files before they take the old ones' names.
    await Promise.all(Object.values(this.#logs).map((s) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.write('', () => resolve())))));
    for (const [tmp, file] of this.#rewrites.splice(0)) await rename(tmp, file);
  }

  /** Flush the logs and write summary.json atomically (write then rename). */
  async finish(summary: object): Promise<void> {
    if (this.#closed) return;
    await this.#close();
    const tmp = path.join(this.dir, `.${RUN_FILES.summary}.tmp`);
    await writeFile(tmp, `${JSON.stringify(summary, null, 2)}\n`);
    await rename(tmp, path.join(this.dir, RUN_FILES.summary));
  }

  async #close(): Promise<void> {
    this.#flush();
    this.#writeIndex();
    this.#closed = true;
    await Promise.all(
      Object.values(this.#logs).map(async (s) => {
        s.end();
        try {
          await finished(s);
        } catch {
          // Already counted by the stream's 'error' listener.
        }
      }),
    );
    // A resume that never completed its rewrite leaves the folder as it found it.
    await Promise.all(this.#rewrites.splice(0).map(([tmp]) => rm(tmp, { force: true })));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#closed) await this.#close();
  }
}

/** What follows a settled step's params in its event, as the env core and the runner build it: the trajectory record's too. */
const TRAJECTORY_TAIL = new Set(['params', 'observation', 'rewards', 'error', 'available_actions']);

/** `JSON.stringify` of a number. */
const numberJson = (n: number): string => (Number.isFinite(n) ? String(n) : 'null');

/**
 * The trajectories.jsonl line of a settled step whose event is already in JSON (`eventJson`, as
 * events.jsonl has it): its params, observation, rewards and offered actions are taken from there,
 * not serialized a second time (the bulk of both lines: a τ-bench observation is kilobytes). The
 * same record as `JSON.stringify(trajectoryRecord(runId, e))`, in another key order.
 */
export function trajectoryLine(runId: string, e: SettledStepEvent, eventJson: string): string {
  // The tail is taken as is only when every key from `params` on is the record's (and none before):
  // then `,"params":` first occurs at that key (a quote inside an earlier string is escaped).
  let inTail = false;
  for (const key in e) {
    if (key === 'params') inTail = true;
    else if (inTail !== TRAJECTORY_TAIL.has(key)) return JSON.stringify(trajectoryRecord(runId, e));
  }
  const at = eventJson.indexOf(',"params":');
  if (!inTail || at === -1) return JSON.stringify(trajectoryRecord(runId, e));
  const actor = e.actor ? ',"actor":"user"' : '';
  return `{"run_id":${JSON.stringify(runId)},"episode":${numberJson(e.episode)},"instance_id":${JSON.stringify(e.instance_id)},"step":${numberJson(e.step)},"trace_id":${JSON.stringify(e.trace_id)},"time":${numberJson(e.time)},"action":${JSON.stringify(e.action)}${actor},"status":${JSON.stringify(e.status)},"reward":${numberJson(e.reward)},"done":${e.done === true},"seq_before":${numberJson(e.seq_before)},"state_seq":${numberJson(e.seq)},"duration_ms":${numberJson(roundedMs(e.duration_ms))}${eventJson.slice(at)}`;
}

/** A duration as trajectories.jsonl has it: to the microsecond. */
const roundedMs = (ms: number): number => Math.round(ms * 1000) / 1000;

/** The trajectories.jsonl line of a settled step. */
export function trajectoryRecord(runId: string, e: SettledStepEvent): TrajectoryRecord {
  return {
    run_id: runId,
    episode: e.episode,
    instance_id: e.instance_id,
    step: e.step,
    trace_id: e.trace_id,
    time: e.time,
    action: e.action,
    ...(e.actor ? { actor: e.actor } : {}),
    params: e.params,
    status: e.status,
    ...(e.observation !== undefined ? { observation: e.observation } : {}),
    reward: e.reward,
    rewards: e.rewards,
    done: e.done,
    seq_before: e.seq_before,
    state_seq: e.seq,
    duration_ms: roundedMs(e.duration_ms),
    ...(e.available_actions ? { available_actions: e.available_actions } : {}),
    ...(e.error ? { error: e.error } : {}),
  };
}

/**
 * Writes a run folder `<out>/<run-id>/`: `events.jsonl` (every event, in order),
 * `trajectories.jsonl` (one record per settled step, with its rewards per source and their
 * status) and, at the end, `summary.json`. Record shapes: schemas/run-event.schema.json,
 * trajectory-record.schema.json, run-summary.schema.json.
 */
import type { WriteStream } from 'node:fs';
import { mkdir, open, rename, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { once } from 'node:events';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import { describeError, UsageError } from '../shared/errors.js';
import type { EnvEventOf, ErrorInfo, RewardEntry } from '../env/events.js';
import type { RunEvent } from '../run/run-events.js';
import type { JsonObject, JsonValue } from '../shared/json.js';

export const RUN_FILES = { events: 'events.jsonl', trajectories: 'trajectories.jsonl', summary: 'summary.json' } as const;

export interface TrajectoryRecord {
  readonly run_id: string;
  readonly episode: number;
  readonly instance_id: string;
  readonly step: number;
  readonly trace_id: string;
  readonly time: number;
  readonly action: string;
  readonly params: JsonObject;
  readonly status: 'resolved' | 'failed';
  readonly observation?: JsonValue;
  readonly reward: number;
  readonly rewards: Readonly<Record<string, RewardEntry>>;
  readonly done: boolean;
  readonly state_seq: number;
  readonly duration_ms: number;
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

/** Records the writer could not write: counted and reported, never dropped silently. */
export interface WriteLoss {
  readonly records: number;
  readonly reason: string;
}

export class RunWriter implements AsyncDisposable {
  readonly runId: string;
  readonly dir: string;
  readonly #events: WriteStream;
  readonly #trajectories: WriteStream;
  readonly #episodeOf = new Map<string, number>();
  readonly #stepOf = new Map<string, number>();
  #seq = 0;
  #closed = false;
  #lost = 0;
  #lossReason = '';

  private constructor(runId: string, dir: string, events: FileHandle, trajectories: FileHandle) {
    this.runId = runId;
    this.dir = dir;
    this.#events = this.#stream(events, RUN_FILES.events);
    this.#trajectories = this.#stream(trajectories, RUN_FILES.trajectories);
  }

  /**
   * Create `<outDir>/<runId>/` and open its logs now, so that a bad `--out` (a file in the path,
   * no permission, a special file) is a usage error before anything runs, not a crash later.
   */
  static async create(outDir: string, runId: string): Promise<RunWriter> {
    const dir = path.resolve(outDir, runId);
    const opened: FileHandle[] = [];
    try {
      await makeDirs(dir);
      for (const name of [RUN_FILES.events, RUN_FILES.trajectories]) opened.push(await open(path.join(dir, name), 'wx'));
    } catch (err) {
      await Promise.all(opened.map((h) => h.close()));
      const code = (err as NodeJS.ErrnoException).code;
      throw new UsageError(`cannot create the run folder '${dir}': ${code ?? describeError(err)}`, `Pass --out a folder you can write to (it is created if missing); ${code === 'ENOTDIR' ? 'a part of that path is a file' : code === 'EACCES' || code === 'EPERM' ? 'you have no permission there' : 'check the path'}.`);
    }
    return new RunWriter(runId, dir, opened[0] as FileHandle, opened[1] as FileHandle);
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

  /** Resolves once both logs have flushed below their buffer limit: the run waits here instead of piling up records. */
  async drained(): Promise<void> {
    for (const s of [this.#events, this.#trajectories]) if (s.writableNeedDrain && !s.destroyed) await once(s, 'drain');
  }

  get needsDrain(): boolean {
    return this.#events.writableNeedDrain || this.#trajectories.writableNeedDrain;
  }

  write(event: RunEvent): void {
    if (this.#closed) return;
    const seq = ++this.#seq;
    if (event.type === 'episode_started') this.#episodeOf.set(event.instanceId, event.episode);
    this.#line(this.#events, () => ({ event_seq: seq, ...event }), `event ${seq} (${event.type})`);
    if (event.type === 'trace_settled') this.#line(this.#trajectories, () => this.#trajectory(event), `the trajectory record of ${event.traceId}`);
  }

  #line(stream: WriteStream, record: () => object, what: string): void {
    let text: string;
    try {
      text = JSON.stringify(record());
    } catch (err) {
      this.#lose(1, `${what} is not JSON: ${describeError(err)}`);
      return;
    }
    stream.write(`${text}\n`);
  }

  #trajectory(e: EnvEventOf<'trace_settled'>): TrajectoryRecord {
    const step = (this.#stepOf.get(e.instanceId) ?? 0) + 1;
    this.#stepOf.set(e.instanceId, step);
    return {
      run_id: this.runId,
      episode: this.#episodeOf.get(e.instanceId) ?? -1,
      instance_id: e.instanceId,
      step,
      trace_id: e.traceId,
      time: e.time,
      action: e.action,
      params: e.params,
      status: e.status,
      ...(e.observation !== undefined ? { observation: e.observation } : {}),
      reward: e.reward,
      rewards: e.rewards,
      done: e.done,
      state_seq: e.seq,
      duration_ms: Math.round(e.durationMs * 1000) / 1000,
      ...(e.error ? { error: e.error } : {}),
    };
  }

  /** Flush both logs and write summary.json atomically (write then rename). */
  async finish(summary: object): Promise<void> {
    if (this.#closed) return;
    await this.#close();
    const tmp = path.join(this.dir, `.${RUN_FILES.summary}.tmp`);
    await writeFile(tmp, `${JSON.stringify(summary, null, 2)}\n`);
    await rename(tmp, path.join(this.dir, RUN_FILES.summary));
  }

  async #close(): Promise<void> {
    this.#closed = true;
    await Promise.all(
      [this.#events, this.#trajectories].map(async (s) => {
        s.end();
        try {
          await finished(s);
        } catch {
          // Already counted by the stream's 'error' listener.
        }
      }),
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#closed) await this.#close();
  }
}

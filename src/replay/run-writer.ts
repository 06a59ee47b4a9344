/**
 * Writes a run folder `<out>/<run-id>/`: `events.jsonl` (every event, in order),
 * `trajectories.jsonl` (one record per settled step, with its rewards per source and their
 * status) and, at the end, `summary.json`. Record shapes: schemas/run-event.schema.json,
 * trajectory-record.schema.json, run-summary.schema.json.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import type { EnvEventOf, ErrorInfo, RewardEntry } from '../env/events.js';
import type { RunEvent } from '../lifecycle/run-events.js';
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

export class RunWriter implements AsyncDisposable {
  readonly runId: string;
  readonly dir: string;
  readonly #events: WriteStream;
  readonly #trajectories: WriteStream;
  readonly #episodeOf = new Map<string, number>();
  readonly #stepOf = new Map<string, number>();
  #seq = 0;
  #closed = false;

  private constructor(runId: string, dir: string) {
    this.runId = runId;
    this.dir = dir;
    this.#events = createWriteStream(path.join(dir, RUN_FILES.events), { flags: 'wx' });
    this.#trajectories = createWriteStream(path.join(dir, RUN_FILES.trajectories), { flags: 'wx' });
  }

  static async create(outDir: string, runId: string): Promise<RunWriter> {
    const dir = path.resolve(outDir, runId);
    await mkdir(dir, { recursive: true });
    return new RunWriter(runId, dir);
  }

  write(event: RunEvent): void {
    if (this.#closed) return;
    this.#events.write(`${JSON.stringify({ event_seq: ++this.#seq, ...event })}\n`);
    if (event.type === 'episode_started') this.#episodeOf.set(event.instanceId, event.episode);
    else if (event.type === 'trace_settled') this.#trajectories.write(`${JSON.stringify(this.#trajectory(event))}\n`);
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
    this.#closed = true;
    this.#events.end();
    this.#trajectories.end();
    await Promise.all([finished(this.#events), finished(this.#trajectories)]);
    const tmp = path.join(this.dir, `.${RUN_FILES.summary}.tmp`);
    await writeFile(tmp, `${JSON.stringify(summary, null, 2)}\n`);
    await rename(tmp, path.join(this.dir, RUN_FILES.summary));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#events.end();
    this.#trajectories.end();
    await Promise.all([finished(this.#events), finished(this.#trajectories)]);
  }
}

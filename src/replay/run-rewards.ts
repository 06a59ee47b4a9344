/**
 * A run folder's rewards, rebuilt after the run: the steps of `trajectories.jsonl` opened in a
 * ledger, the reward log `rewards.jsonl` replayed over them, and the deadlines due by `now`
 * applied. `agent reward` delivers into it and appends what changed; `agent rewards sla` and
 * `agent export` read it. Nothing here rewrites a line of the folder.
 */
import { createReadStream, existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { RewardLedger as Ledger } from '../reward/ledger.js';
import { RewardLedger, type DeliveryResult, type RewardDelivery, type RewardEvent } from '../reward/ledger.js';
import type { JsonSchema } from '../schema/ajv.js';
import type { RewardAggregation, RewardFallback, RewardSourceDefinition } from '../schema/definition.js';
import { AgentError, isAgentError, ValidationError } from '../shared/errors.js';
import { processAlive } from '../shared/process.js';
import { appendRewardRecords, rewardEvent, rewardRecord, type RewardLogRecord } from './reward-log.js';
import { RUN_FILES, type EpisodeRecord, type TrajectoryRecord } from './run-writer.js';
import { lockRunFolder } from './folder-lock.js';

/** run.json, as the run writes it. */
export interface RunManifest {
  readonly schema_version: 1;
  readonly run_id: string;
  readonly env: string;
  readonly env_dir: string;
  readonly started_at: string;
  readonly pid: number;
  /** The run's local server, when it was started with --port. */
  readonly port?: number;
  readonly config: Readonly<Record<string, unknown>>;
  readonly reward_sources: Readonly<
    Record<
      string,
      {
        readonly binding: RewardSourceDefinition['binding']['kind'];
        readonly schema: JsonSchema;
        readonly delay_ms: number;
        readonly deadline_ms?: number;
        readonly aggregation: RewardAggregation;
        readonly weight: number;
        readonly fallback?: RewardFallback;
      }
    >
  >;
}

/** Read a JSON-lines file record by record, without holding it whole (a run folder may be gigabytes). */
export async function forEachLine(file: string, onRecord: (record: Record<string, unknown>, line: number) => void): Promise<void> {
  if (!existsSync(file)) return;
  const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch (err) {
      // A run killed mid-write leaves a torn last line; anything else is corruption worth naming.
      throw new AgentError('STATE_CORRUPT', `${path.basename(file)}:${n} is not JSON: ${(err as Error).message}`, { hint: 'A run killed mid-write can tear its last line; remove that line, or restore the file.' });
    }
    onRecord(record as Record<string, unknown>, n);
  }
}

export async function readManifest(dir: string): Promise<RunManifest> {
  const file = path.join(dir, RUN_FILES.manifest);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new AgentError('BAD_USAGE', `'${dir}' is not a run folder: ${RUN_FILES.manifest} ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'is missing' : `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`}`, {
      hint: 'Pass a folder written by `agent run` (runs/<run-id>), from a version that writes run.json.',
    });
  }
  return JSON.parse(text) as RunManifest;
}

/** The reward source contracts recorded in run.json, as definitions the ledger takes. */
function sourcesOf(manifest: RunManifest): Map<string, RewardSourceDefinition> {
  const out = new Map<string, RewardSourceDefinition>();
  for (const [name, r] of Object.entries(manifest.reward_sources)) {
    out.set(name, {
      name,
      schema: r.schema,
      delayMs: r.delay_ms,
      ...(r.deadline_ms !== undefined ? { deadlineMs: r.deadline_ms } : {}),
      aggregation: r.aggregation,
      weight: r.weight,
      ...(r.fallback ? { fallback: r.fallback } : {}),
      // Offline, only "reported by the tool" or "arrives later" matters.
      binding: r.binding === 'tool' ? { kind: 'tool' } : { kind: 'external' },
    });
  }
  return out;
}

export interface RunRewards {
  readonly dir: string;
  readonly manifest: RunManifest;
  readonly ledger: Ledger;
  readonly steps: readonly TrajectoryRecord[];
  readonly episodes: ReadonlyMap<number, EpisodeRecord>;
  /** Reward log records this session produced (deadlines applied as of now, deliveries): not yet written. */
  readonly unwritten: readonly RewardLogRecord[];
  /** Append the unwritten records to rewards.jsonl (one write) and forget them. */
  commit(): Promise<number>;
  /** True when the run's process is still alive and has not finished: it owns the folder. */
  readonly live: boolean;
}

export async function openRunRewards(dir: string, options: { readonly now?: number } = {}): Promise<RunRewards> {
  const manifest = await readManifest(dir);
  const unwritten: RewardLogRecord[] = [];
  let clockNow = options.now ?? Date.now();
  const ledger = new RewardLedger(sourcesOf(manifest), { now: () => clockNow, emit: (e: RewardEvent) => unwritten.push(rewardRecord(e)) });
  const weights = new Map(Object.entries(manifest.reward_sources).map(([n, r]) => [n, r]));
  const steps: TrajectoryRecord[] = [];
  await forEachLine(path.join(dir, RUN_FILES.trajectories), (r) => {
    const t = r as unknown as TrajectoryRecord;
    steps.push(t);
    openTrajectoryStep(ledger, t, weights);
  });
  await forEachLine(path.join(dir, RUN_FILES.rewards), (r) => ledger.replay(rewardEvent(r as unknown as RewardLogRecord)));
  const episodes = new Map<number, EpisodeRecord>();
  await forEachLine(path.join(dir, RUN_FILES.episodes), (r) => episodes.set((r as unknown as EpisodeRecord).episode, r as unknown as EpisodeRecord));
  // Deadlines that passed while no process was watching apply now, as they would have live.
  ledger.expire(clockNow);
  const live = !existsSync(path.join(dir, RUN_FILES.summary)) && processAlive(manifest.pid);
  return {
    dir,
    manifest,
    ledger,
    steps,
    episodes,
    unwritten,
    live,
    async commit() {
      const n = unwritten.length;
      await appendRewardRecords(path.join(dir, RUN_FILES.rewards), unwritten.splice(0));
      clockNow = Date.now();
      return n;
    },
  };
}

/**
 * Open a step read back from a trajectory record in a ledger: its tool-reported rewards are the
 * immediate part, every other source named in its rewards is one it expects.
 */
export function openTrajectoryStep(ledger: Ledger, t: TrajectoryRecord, sources: ReadonlyMap<string, { readonly binding: string; readonly weight: number }>): void {
  if (t.status !== 'resolved') return;
  let immediate = 0;
  const expected: string[] = [];
  for (const [name, entry] of Object.entries(t.rewards)) {
    const source = sources.get(name);
    if (source?.binding === 'tool') immediate += source.weight * (entry.value ?? 0);
    else expected.push(name);
  }
  ledger.open({ traceId: t.trace_id, instanceId: t.instance_id, episode: t.episode, step: t.step, action: t.action, time: t.time }, immediate, expected);
}

export interface FolderDelivery {
  /** Where the delivery came from (a line of a feedback file), for error messages. */
  readonly line: number;
  readonly delivery: unknown;
}

export interface FolderDeliveryReport {
  readonly landed: readonly ({ readonly line: number } & DeliveryResult)[];
  readonly errors: readonly { readonly line: number; readonly message: string; readonly pointer?: string }[];
  /** Deadlines that had passed unapplied and were applied now. */
  readonly imputed: number;
  /** Lines appended to rewards.jsonl (0 when any delivery was bad: then nothing is written). */
  readonly written: number;
}

/**
 * Deliver rewards to a finished (or dead) run's folder: all or nothing. Every delivery is checked
 * against the run's steps and sources; if any is bad, nothing is written and each bad one is
 * reported with its line. A duplicate (same step, source and key) is a no-op, reported as such.
 */
export async function deliverToRunFolder(dir: string, deliveries: readonly FolderDelivery[], options: { readonly now?: number; readonly lockTimeoutMs?: number } = {}): Promise<FolderDeliveryReport> {
  await readManifest(dir);
  // One writer at a time, and the log read under the lock: what another writer appended is seen.
  await using _lock = await lockRunFolder(dir, options.lockTimeoutMs !== undefined ? { timeoutMs: options.lockTimeoutMs } : {});
  const run = await openRunRewards(dir, options);
  if (run.live) {
    throw new AgentError('BAD_USAGE', `run ${run.manifest.run_id} is still running (pid ${run.manifest.pid}); its process owns the reward log`, {
      hint: run.manifest.port !== undefined ? `POST the rewards to http://127.0.0.1:${run.manifest.port}/rewards while it runs, or deliver them here once it has finished.` : 'Deliver them once it has finished, or start runs with --port to take rewards while they run.',
    });
  }
  const imputed = run.unwritten.length;
  const landed: ({ line: number } & DeliveryResult)[] = [];
  const errors: { line: number; message: string; pointer?: string }[] = [];
  for (const { line, delivery } of deliveries) {
    try {
      if (typeof delivery !== 'object' || delivery === null || Array.isArray(delivery)) throw new ValidationError('REWARD_INVALID', 'reward not delivered', [{ pointer: '', message: 'must be an object {trace_id | episode+step | episode+time, source, value, key?}' }], 'Fix the line.');
      landed.push({ line, ...run.ledger.deliver(delivery as RewardDelivery) });
    } catch (err) {
      if (!isAgentError(err)) throw err;
      const issue = err instanceof ValidationError ? err.issues[0] : undefined;
      errors.push({ line, message: issue ? issue.message : err.message, ...(issue ? { pointer: issue.pointer } : {}) });
    }
  }
  const written = errors.length > 0 ? 0 : await run.commit();
  return { landed, errors, imputed, written };
}

/**
 * A run folder's rewards, rebuilt after the run: the steps of `trajectories.jsonl` opened in a
 * ledger, the reward log `rewards.jsonl` replayed over them, and the deadlines due by `now`
 * applied. `agent reward` delivers into it and appends what changed; `agent rewards sla` and
 * `agent export` read it. Nothing here rewrites a line of the folder.
 */
import { createReadStream, existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { RewardLedger as Ledger } from '../reward/ledger.js';
import { RewardLedger, type DeliveryResult, type RewardDelivery, type RewardEvent } from '../reward/ledger.js';
import type { JsonSchema } from '../schema/ajv.js';
import type { RewardAggregation, RewardFallback, RewardSourceDefinition } from '../schema/definition.js';
import { compileSchema, validate, validateWith } from '../schema/ajv.js';
import { metaSchema, type MetaSchemaName } from '../schema/meta-schemas.js';
import { AgentError, isAgentError, ValidationError, type Issue } from '../shared/errors.js';
import { processAlive } from '../shared/process.js';
import { appendRewardRecords, rewardEvent, rewardRecord, type RewardLogRecord } from './reward-log.js';
import { RUN_FILES, type EpisodeRecord, type TrajectoryRecord } from './run-writer.js';
import { lockRunFolder } from './folder-lock.js';
import { cleanSum } from '../shared/float-sum.js';

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

/**
 * How a folder's records are read: strictly (a bad record is a `RECORD_INVALID` naming file and
 * line), or leniently (bad records are skipped and counted here, the first one described).
 */
export class RecordReading {
  readonly lenient: boolean;
  skipped = 0;
  first: string | undefined;

  constructor(lenient = false) {
    this.lenient = lenient;
  }

  /** A bad record at `where` (`file:line`): thrown, or counted when lenient. */
  bad(where: string, message: string): void {
    if (!this.lenient) throw new AgentError('RECORD_INVALID', `${where}: ${message}`, { hint: 'The run folder was edited or damaged: fix or remove that line (or restore the file), or pass --lenient to skip bad records, counted.' });
    this.skipped++;
    this.first ??= `${where}: ${message}`;
  }
}

/**
 * Read a JSON-lines file record by record, without holding it whole (a run folder may be
 * gigabytes). With `schema`, each record is checked against that meta-schema first; a line that
 * is not JSON (a run killed mid-write tears its last line) or breaks the schema goes to `reading`.
 */
export async function forEachLine(file: string, onRecord: (record: Record<string, unknown>, line: number) => void, options: { readonly schema?: MetaSchemaName; readonly reading?: RecordReading } = {}): Promise<void> {
  if (!existsSync(file)) return;
  const reading = options.reading ?? new RecordReading();
  // compileSchema keeps one validator per schema object, and metaSchema one object per name.
  const check = options.schema ? compileSchema(metaSchema(options.schema)) : undefined;
  const lines = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  const name = path.basename(file);
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch (err) {
      reading.bad(`${name}:${n}`, `not JSON (${(err as Error).message})`);
      continue;
    }
    if (check) {
      const issues = validateWith(check, record);
      if (issues.length > 0) {
        const issue = issues[0] as Issue;
        reading.bad(`${name}:${n}`, `${issue.pointer || '/'} ${issue.message}`);
        continue;
      }
    }
    onRecord(record as Record<string, unknown>, n);
  }
}

/** Reads and checks a run folder's run.json. */
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
  let manifest: unknown;
  try {
    manifest = JSON.parse(text);
  } catch (err) {
    throw new AgentError('RECORD_INVALID', `${file} is not JSON: ${(err as Error).message}`, { hint: 'run.json was edited or damaged: restore it (agent run writes it at start).' });
  }
  const issue = validate(metaSchema('run-manifest'), manifest)[0];
  if (issue) throw new AgentError('RECORD_INVALID', `${file}: ${issue.pointer || '/'} ${issue.message}`, { hint: 'run.json was edited or damaged: restore it (agent run writes it at start).' });
  return manifest as RunManifest;
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

/** A run folder's steps and its reward ledger replayed from rewards.jsonl, with what was skipped as damaged. */
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
  /** Bad records skipped (read leniently): how many, and the first. */
  readonly skipped: { readonly records: number; readonly first?: string };
}

/** How `openRunRewards` reads a run folder: as of when, how strictly, and which reward log version. */
export interface OpenRunOptions {
  readonly now?: number;
  /** Skip records that are not JSON, break their schema, or repeat a step, counting them (default: refuse, naming file and line). */
  readonly lenient?: boolean;
  /** Which version of the reward log to replay: 1 (default) the run's own `rewards.jsonl`, N the one `agent rescore` wrote as `rewards.vN.jsonl`. */
  readonly rewardVersion?: number;
}

/** The file of a reward log version (1: the run's own). */
export function rewardLogFile(dir: string, version = 1): string {
  return path.join(dir, version === 1 ? RUN_FILES.rewards : `rewards.v${version}.jsonl`);
}

/** The reward log versions a run folder has: 1, and each `agent rescore` wrote. */
export async function rewardVersions(dir: string): Promise<number[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const found = names.flatMap((n) => /^rewards\.v(\d+)\.jsonl$/.exec(n)?.[1] ?? []).map(Number).filter((v) => v > 1);
  return [1, ...found.sort((a, b) => a - b)];
}

/** Opens a run folder for its rewards: steps read and checked, the reward log replayed, deadlines applied as of `now`. */
export async function openRunRewards(dir: string, options: OpenRunOptions = {}): Promise<RunRewards> {
  const manifest = await readManifest(dir);
  const log = rewardLogFile(dir, options.rewardVersion);
  if (options.rewardVersion !== undefined && options.rewardVersion !== 1 && !existsSync(log)) {
    const have = await rewardVersions(dir);
    throw new AgentError('BAD_USAGE', `${dir} has no reward log version ${options.rewardVersion} (${path.basename(log)})`, { hint: `Its versions: ${have.join(', ')} (1 is the run's own; agent rescore writes the others).` });
  }
  const reading = new RecordReading(options.lenient);
  const unwritten: RewardLogRecord[] = [];
  let clockNow = options.now ?? Date.now();
  const ledger = new RewardLedger(sourcesOf(manifest), { now: () => clockNow, emit: (e: RewardEvent) => unwritten.push(rewardRecord(e)) });
  const weights = new Map(Object.entries(manifest.reward_sources).map(([n, r]) => [n, r]));
  const steps: TrajectoryRecord[] = [];
  /** Per episode, the line of each step: a step twice, or one missing, is a damaged file. */
  const lines = new Map<number, Map<number, number>>();
  await forEachLine(
    path.join(dir, RUN_FILES.trajectories),
    (r, line) => {
      const t = r as unknown as TrajectoryRecord;
      let seen = lines.get(t.episode);
      if (!seen) lines.set(t.episode, (seen = new Map()));
      const first = seen.get(t.step);
      if (first !== undefined) return reading.bad(`${RUN_FILES.trajectories}:${line}`, `episode ${t.episode} step ${t.step} again (first at line ${first})`);
      seen.set(t.step, line);
      steps.push(t);
      openTrajectoryStep(ledger, t, weights);
    },
    { schema: 'trajectory-record', reading },
  );
  for (const [episode, seen] of lines) {
    for (let step = 1; step <= seen.size; step++) {
      if (seen.has(step)) continue;
      const after = [...seen.keys()].filter((s) => s > step).sort((a, b) => a - b)[0] as number;
      reading.bad(`${RUN_FILES.trajectories}:${seen.get(after) ?? 0}`, `episode ${episode} has step ${after} but no step ${step} (a line was removed)`);
      break;
    }
  }
  await forEachLine(log, (r) => ledger.replay(rewardEvent(r as unknown as RewardLogRecord)), { schema: 'reward-log-record', reading });
  const episodes = new Map<number, EpisodeRecord>();
  await forEachLine(path.join(dir, RUN_FILES.episodes), (r) => episodes.set((r as unknown as EpisodeRecord).episode, r as unknown as EpisodeRecord), { schema: 'episode-record', reading });
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
    skipped: { records: reading.skipped, ...(reading.first !== undefined ? { first: reading.first } : {}) },
    async commit() {
      const n = unwritten.length;
      await appendRewardRecords(log, unwritten.splice(0));
      clockNow = Date.now();
      return n;
    },
  };
}

/** Each episode's return as the folder has it: the sum of its steps' rewards, every delayed value that arrived (or was imputed) included. */
export function episodeReturns(run: RunRewards): Map<number, number> {
  const out = new Map<number, number>();
  for (const t of run.steps) {
    const r = t.status === 'failed' ? 0 : (run.ledger.reward(t.trace_id, 'final') ?? t.reward);
    out.set(t.episode, cleanSum((out.get(t.episode) ?? 0) + r));
  }
  return out;
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

/** One line of rewards to deliver into a run folder (`agent reward`): its line number, and the delivery as read (checked when delivered). */
export interface FolderDelivery {
  /** Where the delivery came from (a line of a feedback file), for error messages. */
  readonly line: number;
  readonly delivery: unknown;
}

/** What delivering into a run folder did: the rewards that landed (on time, late, duplicates) by line, the lines refused and why, rewards imputed, lines written. */
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

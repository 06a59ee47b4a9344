/**
 * `agent export`: a run folder as trainer input, one record per step. By default a step carries
 * the seq of the state the policy saw and the patch its action committed (a 5 MB state is not
 * repeated on every step: the initial states are in the run folder's states.jsonl); with
 * `state: 'full'` it carries that whole state, rebuilt from the episode's initial state and the
 * committed patches in events.jsonl.
 * Rewards are the ledger's as of now (the reward log replayed, deadlines applied): `final` counts
 * imputed values, `arrived` only what arrived. A failed step is marked (`status: "failed"`,
 * `reward: null`), never zeroed. Returns-to-go are summed backwards over each episode.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ErrorInfo, RewardEntry } from '../events/env-events.js';
import type { RewardBasis } from '../reward/ledger.js';
import { AgentError } from '../shared/errors.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { WellFormed, type Replaced } from '../shared/well-formed.js';
import { applyPatch, type Patch } from '../state/patch.js';
import { forEachLine, openRunRewards, RecordReading, type RunRewards } from './run-rewards.js';
import { RUN_FILES, type StateRecord, type TrajectoryRecord } from './run-writer.js';

/** One line of an export (schemas/export-record.schema.json). */
export interface ExportRecord {
  readonly run_id: string;
  readonly episode: number;
  readonly step: number;
  readonly trace_id: string;
  readonly instance_id: string;
  readonly time: number;
  /** What the policy saw: the seq of the state it chose on (the state itself with `state: 'full'`) and the actions it could choose from. */
  readonly observation: { readonly state?: JsonValue; readonly state_seq: number; readonly available_actions: readonly string[] | null };
  readonly action: string;
  /** `user` for a call the env's other side made (τ²-bench telecom's user on their phone): not the agent's action to learn from. */
  readonly actor?: 'user';
  readonly params: JsonObject;
  /** What the action changed in the state (RFC 6902), from `state_seq` to the next; empty for a failed step. Left out with `state: 'none'`. */
  readonly patch?: Patch;
  /** The tool's answer. */
  readonly result: JsonValue | null;
  readonly rewards: Readonly<Record<string, RewardEntry>>;
  /** Σ weight × value by the chosen basis; null for a failed step. */
  readonly reward: number | null;
  readonly reward_basis: RewardBasis;
  readonly terminated: boolean;
  readonly truncated: boolean;
  readonly status: 'resolved' | 'failed';
  /** Σ γ^k × reward from this step to the episode's end (failed steps count 0). */
  readonly return_to_go: number;
  readonly episode_return: number;
  readonly error?: ErrorInfo;
  /** Benchmark runs: the episode's task, and whether it succeeded (also its last step's `success` reward). */
  readonly task_id?: string;
  readonly success?: boolean;
}

/** What a benchmark's verdicts add to an episode's last step: `success` (1 or 0) and each custom metric, as `metric:<name>`. */
export const METRIC_REWARD_PREFIX = 'metric:';

/** A benchmark episode's verdict, from the run folder's benchmark.json and the suite's tasks. */
export interface Verdict {
  readonly task_id: string;
  readonly success: boolean;
  readonly instruction?: string;
  /** The episode's values of the benchmark's custom metrics (`agent benchmark --metric`). */
  readonly metrics?: Readonly<Record<string, number>>;
}

/** How `exportRun` builds its records: the reward basis, what of the state to include, the discount, and what to do with damaged records. */
export interface ExportOptions {
  readonly rewards?: RewardBasis;
  /** Which reward log to count: 1 (default) the run's own, N a version `agent rescore` wrote. */
  readonly rewardVersion?: number;
  /**
   * What each record holds of the state: `patch` (default: the seq it was chosen on, and the patch
   * the step committed), `full` (the whole state the policy saw, repeated on every step), `none`
   * (only the seq).
   */
  readonly state?: StateMode;
  /** Discount of returns-to-go (default 1). */
  readonly gamma?: number;
  readonly now?: number;
  /** Skip bad records (not JSON, breaking their schema, a step twice) instead of refusing the folder; `onSkipped` hears how many. */
  readonly lenient?: boolean;
  readonly onSkipped?: (skipped: RunRewards['skipped']) => void;
  /**
   * Told how many strings held a lone surrogate (half of a UTF-16 pair, which UTF-8 cannot encode):
   * every export puts U+FFFD in its place, in JSON lines as in Parquet, and says so here.
   */
  readonly onReplaced?: (replaced: Replaced) => void;
  /**
   * Benchmark runs: which verdict is the episode's final reward, counted in its last step's reward
   * and the returns: `success` (default; 1 or 0) or the name of a custom metric (its value). The
   * others ride along in the last step's `rewards` without counting.
   */
  readonly verdict?: string;
}

/** What each exported step holds of the state: `patch` (the seq it was chosen on and the patch it committed), `full` (the whole state), `none` (the seq). */
export type StateMode = 'patch' | 'full' | 'none';

/** Every step of a run folder as an export record, episode by episode, steps in order; its text well-formed (see `onReplaced`). */
export async function exportRun(dir: string, options: ExportOptions = {}): Promise<ExportRecord[]> {
  const text = new WellFormed();
  const records = (await exportSteps(dir, options)).map((r) => wellFormedStep(text, r));
  reportReplaced(text, options);
  return records;
}

export function wellFormedStep(text: WellFormed, record: ExportRecord): ExportRecord {
  return text.value(record, `episode ${record.episode} step ${record.step}`);
}

export function reportReplaced(text: WellFormed, options: Pick<ExportOptions, 'onReplaced'>): void {
  const replaced = text.replaced;
  if (replaced.strings > 0) options.onReplaced?.(replaced);
}

/** exportRun's records as the folder has them. */
export async function exportSteps(dir: string, options: ExportOptions = {}): Promise<ExportRecord[]> {
  const run = await openRunRewards(dir, { ...(options.now !== undefined ? { now: options.now } : {}), ...(options.rewardVersion !== undefined ? { rewardVersion: options.rewardVersion } : {}), lenient: options.lenient === true });
  const basis = options.rewards ?? 'final';
  const gamma = options.gamma ?? 1;
  const mode = options.state ?? 'patch';
  const reading = new RecordReading(options.lenient);
  const states = mode === 'full' ? await statesBySeq(dir, run, reading) : undefined;
  const patches = mode === 'patch' ? await patchesByTrace(dir, reading) : undefined;
  if (run.skipped.records + reading.skipped > 0) options.onSkipped?.({ records: run.skipped.records + reading.skipped, ...((run.skipped.first ?? reading.first) !== undefined ? { first: run.skipped.first ?? reading.first } : {}) });
  const verdicts = await readVerdicts(dir, run.manifest.env_dir);
  const verdictValue = verdictReader(verdicts, options.verdict ?? 'success', dir);
  const byEpisode = new Map<number, TrajectoryRecord[]>();
  for (const t of run.steps) {
    const list = byEpisode.get(t.episode);
    if (list) list.push(t);
    else byEpisode.set(t.episode, [t]);
  }
  const out: ExportRecord[] = [];
  for (const episode of [...byEpisode.keys()].sort((a, b) => a - b)) {
    const steps = (byEpisode.get(episode) as TrajectoryRecord[]).sort((a, b) => a.step - b.step);
    const ep = run.episodes.get(episode);
    const verdict = verdicts.get(episode);
    const rewards = steps.map((t) => (t.status === 'failed' ? null : (run.ledger.reward(t.trace_id, basis) ?? t.reward)));
    // A benchmark's verdict is the episode's final reward: what the policy is trained toward.
    if (verdict) rewards[rewards.length - 1] = (rewards[rewards.length - 1] ?? 0) + verdictValue(verdict);
    const rtg = new Array<number>(steps.length);
    let acc = 0;
    for (let i = steps.length - 1; i >= 0; i--) {
      acc = (rewards[i] ?? 0) + gamma * acc;
      rtg[i] = acc;
    }
    steps.forEach((t, i) => {
      const last = i === steps.length - 1;
      const stateSeq = t.seq_before;
      out.push({
        run_id: t.run_id,
        episode,
        step: t.step,
        trace_id: t.trace_id,
        instance_id: t.instance_id,
        time: t.time,
        observation: {
          ...(states ? { state: states.get(t.instance_id)?.get(stateSeq) ?? null } : {}),
          state_seq: stateSeq,
          available_actions: t.available_actions ?? null,
        },
        action: t.action,
        ...(t.actor ? { actor: t.actor } : {}),
        params: t.params,
        ...(patches ? { patch: patches.get(t.trace_id) ?? [] } : {}),
        result: t.observation ?? null,
        rewards: {
          ...Object.fromEntries(Object.entries(t.rewards).filter(([, e]) => e.delay_ms === 0 && e.status === 'arrived')),
          ...(run.ledger.entries(t.trace_id) ?? {}),
          ...(verdict && last ? verdictRewards(verdict) : {}),
        },
        reward: rewards[i] ?? null,
        reward_basis: basis,
        // An episode without a record was cut off (the process died): its last step is truncated.
        terminated: last && ep !== undefined && ep.terminated,
        truncated: last && (ep === undefined || ep.truncated),
        status: t.status,
        return_to_go: round(rtg[i] as number),
        episode_return: round(rtg[0] as number),
        ...(t.error ? { error: t.error } : {}),
        ...(verdict ? { task_id: verdict.task_id, success: verdict.success } : {}),
      });
    });
  }
  return out;
}

/** A benchmark episode's verdicts as reward entries of its last step: `success`, then each custom metric. */
function verdictRewards(verdict: Verdict): Record<string, RewardEntry> {
  const entry = (value: number): RewardEntry => ({ status: 'arrived', value, arrived_at: null, delay_ms: null });
  return {
    success: entry(Number(verdict.success)),
    ...Object.fromEntries(Object.entries(verdict.metrics ?? {}).map(([name, value]) => [`${METRIC_REWARD_PREFIX}${name}`, entry(value)])),
  };
}

/**
 * How to read the chosen verdict off an episode's: `success` as 1 or 0, a custom metric as its
 * value. A metric the run's benchmark did not compute, or any verdict on a run that was not a
 * benchmark, is refused up front, naming the ones there are.
 */
export function verdictReader(verdicts: ReadonlyMap<number, Verdict>, name: string, dir: string): (verdict: Verdict) => number {
  if (name === 'success') return (v) => Number(v.success);
  if (verdicts.size === 0) {
    throw new AgentError('BAD_USAGE', `--verdict ${name}: ${dir} is not a benchmark run (it has no benchmark.json)`, { hint: 'Drop --verdict: a run that is not a benchmark has only its env\'s rewards.' });
  }
  const known = new Set([...verdicts.values()].flatMap((v) => Object.keys(v.metrics ?? {})));
  if (!known.has(name)) {
    throw new AgentError('BAD_USAGE', `--verdict ${name}: the benchmark in ${dir} computed no metric '${name}'`, {
      hint: known.size > 0 ? `Pick success or one of its metrics: ${[...known].sort().join(', ')}.` : 'Its benchmark ran without --metric: only success can be the final reward.',
    });
  }
  return (v) => {
    const value = v.metrics?.[name];
    if (value === undefined) throw new AgentError('BAD_USAGE', `--verdict ${name}: the metric has no value for task ${v.task_id} in ${dir}`, { hint: `Its metric module answered other keys on that episode; pick a metric every episode has.` });
    return value;
  };
}

/**
 * The states each step was chosen on, by instance and seq: each instance's initial state with
 * its committed patches applied in order. States share structure, so holding one per seq costs
 * only what each patch changed.
 */
async function statesBySeq(dir: string, run: RunRewards, reading: RecordReading): Promise<Map<string, Map<number, JsonValue>>> {
  const initial = new Map<string, JsonValue>();
  await forEachLine(path.join(dir, RUN_FILES.states), (r) => initial.set((r as unknown as StateRecord).state_id, (r as unknown as StateRecord).state), { schema: 'state-record', reading });
  const wanted = new Map<string, Set<number>>();
  for (const t of run.steps) {
    const set = wanted.get(t.instance_id);
    if (set) set.add(t.seq_before);
    else wanted.set(t.instance_id, new Set([t.seq_before]));
  }
  const current = new Map<string, { state: JsonValue; seq: number }>();
  const out = new Map<string, Map<number, JsonValue>>();
  const keep = (instance: string, seq: number, state: JsonValue): void => {
    if (!wanted.get(instance)?.has(seq)) return;
    let m = out.get(instance);
    if (!m) out.set(instance, (m = new Map()));
    m.set(seq, state);
  };
  await forEachLine(path.join(dir, RUN_FILES.events), (e) => {
    const instance = e['instance_id'] as string;
    if (e['type'] === 'episode_started') {
      const state = initial.get(e['initial_state_id'] as string);
      if (state === undefined) return;
      current.set(instance, { state, seq: 0 });
      keep(instance, 0, state);
    } else if (e['type'] === 'state_committed') {
      const cur = current.get(instance);
      if (!cur) return;
      cur.state = applyPatch(cur.state, e['patch'] as Patch);
      cur.seq = e['seq'] as number;
      keep(instance, cur.seq, cur.state);
    }
  }, { reading });
  return out;
}

/**
 * The verdicts of a benchmark run (`agent benchmark` writes benchmark.json into its run folder),
 * by episode, with each task's instruction from the suite's tasks file; empty for another run.
 */
export async function readVerdicts(dir: string, envDir: string): Promise<Map<number, Verdict>> {
  const out = new Map<number, Verdict>();
  let report: { split?: string; tasks?: { id: string; trials: { episode: number; success: boolean; metrics?: Record<string, number> }[] }[] };
  try {
    report = JSON.parse(await readFile(path.join(dir, 'benchmark.json'), 'utf8')) as typeof report;
  } catch {
    return out;
  }
  const instructions = new Map<string, string>();
  const tasksFile = path.join(envDir, 'tasks', `${report.split ?? 'test'}.jsonl`);
  if (existsSync(tasksFile)) {
    for (const line of (await readFile(tasksFile, 'utf8')).split('\n')) {
      if (line.trim() === '') continue;
      const t = JSON.parse(line) as { id?: unknown; instruction?: unknown };
      if (typeof t.id === 'string' && typeof t.instruction === 'string') instructions.set(t.id, t.instruction);
    }
  }
  for (const task of report.tasks ?? []) {
    const instruction = instructions.get(task.id);
    for (const trial of task.trials) {
      out.set(trial.episode, { task_id: task.id, success: trial.success, ...(instruction !== undefined ? { instruction } : {}), ...(trial.metrics ? { metrics: trial.metrics } : {}) });
    }
  }
  return out;
}

/** The patch each step committed, by trace id (a failed step committed none). */
async function patchesByTrace(dir: string, reading: RecordReading): Promise<Map<string, Patch>> {
  const out = new Map<string, Patch>();
  await forEachLine(path.join(dir, RUN_FILES.events), (e) => {
    if (e['type'] === 'state_committed') out.set(e['trace_id'] as string, e['patch'] as Patch);
  }, { reading });
  return out;
}

function round(n: number): number {
  return Math.round(n * 1e9) / 1e9;
}

/**
 * Columns for Parquet, one fixed set whatever the env: scalars as they are; values whose shape
 * varies by tool or env (params, the tool's result, rewards per source, the state, the patch) as
 * JSON text in `*_json` string columns, to decode once (`json.loads`): two envs' exports then
 * share one schema and concatenate. A missing value is a Parquet null, never the text "null".
 */
export async function writeParquet(file: string, records: readonly ExportRecord[]): Promise<void> {
  const { parquetWriteFile } = await import('hyparquet-writer');
  const column = <T>(name: string, type: 'STRING' | 'INT32' | 'DOUBLE' | 'BOOLEAN', f: (r: ExportRecord) => T) => ({ name, data: records.map(f), type });
  const json = (name: string, f: (r: ExportRecord) => unknown) =>
    column(name, 'STRING', (r) => {
      const v = f(r);
      return v === undefined || v === null ? null : JSON.stringify(v);
    });
  parquetWriteFile({
    filename: file,
    columnData: [
      column('run_id', 'STRING', (r) => r.run_id),
      column('episode', 'INT32', (r) => r.episode),
      column('step', 'INT32', (r) => r.step),
      column('trace_id', 'STRING', (r) => r.trace_id),
      column('instance_id', 'STRING', (r) => r.instance_id),
      column('time', 'DOUBLE', (r) => r.time),
      column('state_seq', 'INT32', (r) => r.observation.state_seq),
      json('available_actions_json', (r) => r.observation.available_actions),
      json('state_json', (r) => r.observation.state),
      column('action', 'STRING', (r) => r.action),
      column('actor', 'STRING', (r) => r.actor ?? 'agent'),
      json('params_json', (r) => r.params),
      json('patch_json', (r) => r.patch),
      json('result_json', (r) => r.result),
      json('rewards_json', (r) => r.rewards),
      column('reward', 'DOUBLE', (r) => r.reward),
      column('reward_basis', 'STRING', (r) => r.reward_basis),
      column('terminated', 'BOOLEAN', (r) => r.terminated),
      column('truncated', 'BOOLEAN', (r) => r.truncated),
      column('status', 'STRING', (r) => r.status),
      column('return_to_go', 'DOUBLE', (r) => r.return_to_go),
      column('episode_return', 'DOUBLE', (r) => r.episode_return),
      column('error_code', 'STRING', (r) => r.error?.code ?? null),
      column('error_message', 'STRING', (r) => r.error?.message ?? null),
    ],
  });
}

/**
 * `agent export`: a run folder as trainer input, one record per step. The state the policy saw is
 * rebuilt from the episode's initial state (states.jsonl) and the committed patches in
 * events.jsonl, so a 5 MB state is stored once per distinct initial state, not once per step.
 * Rewards are the ledger's as of now (the reward log replayed, deadlines applied): `final` counts
 * imputed values, `arrived` only what arrived. A failed step is marked (`status: "failed"`,
 * `reward: null`), never zeroed. Returns-to-go are summed backwards over each episode.
 */
import path from 'node:path';
import type { ErrorInfo, RewardEntry } from '../events/env-events.js';
import type { RewardBasis } from '../reward/ledger.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
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
  /** What the policy saw: the state it chose on and the actions it could choose from (state omitted with `state: false`). */
  readonly observation: { readonly state?: JsonValue; readonly state_seq: number; readonly available_actions: readonly string[] | null };
  readonly action: string;
  readonly params: JsonObject;
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
}

export interface ExportOptions {
  readonly rewards?: RewardBasis;
  /** Include the state the policy saw in each record (default true). */
  readonly state?: boolean;
  /** Discount of returns-to-go (default 1). */
  readonly gamma?: number;
  readonly now?: number;
  /** Skip bad records (not JSON, breaking their schema, a step twice) instead of refusing the folder; `onSkipped` hears how many. */
  readonly lenient?: boolean;
  readonly onSkipped?: (skipped: RunRewards['skipped']) => void;
}

/** Every step of a run folder as an export record, episode by episode, steps in order. */
export async function exportRun(dir: string, options: ExportOptions = {}): Promise<ExportRecord[]> {
  const run = await openRunRewards(dir, { ...(options.now !== undefined ? { now: options.now } : {}), lenient: options.lenient === true });
  const basis = options.rewards ?? 'final';
  const gamma = options.gamma ?? 1;
  const wantState = options.state !== false;
  const reading = new RecordReading(options.lenient);
  const states = wantState ? await statesBySeq(dir, run, reading) : undefined;
  if (run.skipped.records + reading.skipped > 0) options.onSkipped?.({ records: run.skipped.records + reading.skipped, ...((run.skipped.first ?? reading.first) !== undefined ? { first: run.skipped.first ?? reading.first } : {}) });
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
    const rewards = steps.map((t) => (t.status === 'failed' ? null : (run.ledger.reward(t.trace_id, basis) ?? t.reward)));
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
        params: t.params,
        result: t.observation ?? null,
        rewards: { ...Object.fromEntries(Object.entries(t.rewards).filter(([, e]) => e.delay_ms === 0 && e.status === 'arrived')), ...(run.ledger.entries(t.trace_id) ?? {}) },
        reward: rewards[i] ?? null,
        reward_basis: basis,
        // An episode without a record was cut off (the process died): its last step is truncated.
        terminated: last && ep !== undefined && ep.terminated,
        truncated: last && (ep === undefined || ep.truncated),
        status: t.status,
        return_to_go: round(rtg[i] as number),
        episode_return: round(rtg[0] as number),
        ...(t.error ? { error: t.error } : {}),
      });
    });
  }
  return out;
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

function round(n: number): number {
  return Math.round(n * 1e9) / 1e9;
}

/** Columns for Parquet: scalars as they are, nested values as JSON text. */
export async function writeParquet(file: string, records: readonly ExportRecord[]): Promise<void> {
  const { parquetWriteFile } = await import('hyparquet-writer');
  const json = (f: (r: ExportRecord) => unknown): string[] => records.map((r) => JSON.stringify(f(r)) ?? 'null');
  parquetWriteFile({
    filename: file,
    columnData: [
      { name: 'run_id', data: records.map((r) => r.run_id), type: 'STRING' },
      { name: 'episode', data: records.map((r) => r.episode), type: 'INT32' },
      { name: 'step', data: records.map((r) => r.step), type: 'INT32' },
      { name: 'trace_id', data: records.map((r) => r.trace_id), type: 'STRING' },
      { name: 'instance_id', data: records.map((r) => r.instance_id), type: 'STRING' },
      { name: 'time', data: records.map((r) => r.time), type: 'DOUBLE' },
      { name: 'observation', data: json((r) => r.observation), type: 'JSON' },
      { name: 'action', data: records.map((r) => r.action), type: 'STRING' },
      { name: 'params', data: json((r) => r.params), type: 'JSON' },
      { name: 'result', data: json((r) => r.result), type: 'JSON' },
      { name: 'rewards', data: json((r) => r.rewards), type: 'JSON' },
      { name: 'reward', data: records.map((r) => r.reward), type: 'DOUBLE' },
      { name: 'reward_basis', data: records.map((r) => r.reward_basis), type: 'STRING' },
      { name: 'terminated', data: records.map((r) => r.terminated), type: 'BOOLEAN' },
      { name: 'truncated', data: records.map((r) => r.truncated), type: 'BOOLEAN' },
      { name: 'status', data: records.map((r) => r.status), type: 'STRING' },
      { name: 'return_to_go', data: records.map((r) => r.return_to_go), type: 'DOUBLE' },
      { name: 'episode_return', data: records.map((r) => r.episode_return), type: 'DOUBLE' },
      { name: 'error', data: records.map((r) => (r.error ? JSON.stringify(r.error) : null)), type: 'JSON' },
    ],
  });
}

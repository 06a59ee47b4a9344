/**
 * `agent rescore`: a finished run's rewards computed again by its env's reward sources as they are
 * now, or with a source's evaluator or judge model replaced, without running the policy or the
 * tools again (NeMo Gym's `reverify`). Each settled step is given to the sources as it was: its
 * action, params and observation from trajectories.jsonl, its states before and after rebuilt from
 * the episode's initial state and committed patches. Episode-scoped sources see each episode whole.
 *
 * The result is a new version of the run's reward log, `rewards.vN.jsonl`: the recomputed sources'
 * values, and every other source's records as the run's own log has them. The run's own log is
 * never changed; `agent export --reward-version N` counts the new one. The report says which
 * episodes' returns changed.
 */
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { EnvRewards } from '../reward/env-rewards.js';
import type { RewardEvent } from '../reward/ledger.js';
import type { EnvEvent } from '../events/env-events.js';
import { loadEnvDefinition } from '../schema/load-env.js';
import { isComputed, type EnvDefinition, type RewardSourceDefinition } from '../schema/definition.js';
import { defaultSourcePolicy } from '../schema/reward-bindings.js';
import { episodeReturns, forEachLine, openRunRewards, rewardLogFile, rewardVersions, RecordReading } from '../replay/run-rewards.js';
import { isLoggedReward, rewardRecord, type RewardLogRecord } from '../replay/reward-log.js';
import { RUN_FILES, type StateRecord, type TrajectoryRecord } from '../replay/run-writer.js';
import { applyPatch, type Patch } from '../state/patch.js';
import { systemClock } from '../shared/clock.js';
import { AgentError, describeError, UsageError } from '../shared/errors.js';
import { importToolModule } from '../tools/module-loader.js';
import type { JsonValue } from '../shared/json.js';

/** What `rescoreRun` computes again, and with what: the sources, a replaced evaluator or judge model. */
export interface RescoreOptions {
  /** The sources to compute again (default: every source of the env that computes its value: a module, a judge, a service). */
  readonly sources?: readonly string[];
  /** A module's function in place of a source's own evaluator, by source: `{judge: {module: '/abs/strict.ts', exportName: 'judge'}}`. */
  readonly evaluators?: Readonly<Record<string, { readonly module: string; readonly exportName: string }>>;
  /** Every LLM-judge source asks this model instead (its prompt and provider kept), at `baseURL` when given. */
  readonly judge?: { readonly model: string; readonly baseURL?: string };
  readonly signal?: AbortSignal;
  /** Values the sources have given so far (arrived or failed), as each lands. */
  readonly onProgress?: (values: number) => void;
}

/** What a rescore did: the new log's version, the sources computed again, and the episodes whose return changed. */
export interface RescoreReport {
  readonly run_dir: string;
  readonly version: number;
  readonly file: string;
  readonly sources: readonly string[];
  readonly evaluations: { readonly arrived: number; readonly failed: number };
  readonly episodes: number;
  /** Episodes whose return differs between the run's own log and the new one, with both. */
  readonly changed: readonly { readonly episode: number; readonly before: number; readonly after: number }[];
}

/** Computes a finished run's rewards again into a new reward log version; see the module comment. */
export async function rescoreRun(dir: string, options: RescoreOptions = {}): Promise<RescoreReport> {
  const before = await openRunRewards(dir);
  if (before.live) throw new UsageError(`run ${before.manifest.run_id} is still running (pid ${before.manifest.pid})`, 'Rescore a run once it has finished: its steps and rewards are still being written.');
  for (const [name, { module, exportName }] of Object.entries(options.evaluators ?? {})) {
    let fn: unknown;
    try {
      fn = (await importToolModule(module))[exportName];
    } catch (err) {
      throw new UsageError(`--evaluator ${name}=${module}: cannot load it (${describeError(err)})`, 'Name a module file that exists and loads: <source>=<path>#<function>.');
    }
    if (typeof fn !== 'function') throw new UsageError(`--evaluator ${name}=${module}#${exportName}: the module has no function '${exportName}'`, 'Name the exported function after #.');
  }
  const definition = withOverrides(await loadEnvDefinition(before.manifest.env_dir), options);
  const computed = [...definition.rewards.values()].filter((d) => isComputed(d.binding)).map((d) => d.name);
  const sources = options.sources ?? computed;
  for (const name of sources) {
    if (!definition.rewards.has(name)) throw new UsageError(`the env has no reward source '${name}'`, `Its sources: ${[...definition.rewards.keys()].join(', ')}.`);
    if (!computed.includes(name)) throw new UsageError(`reward source '${name}' is ${definition.rewards.get(name)?.binding.kind === 'tool' ? "reported by the tool: only running the tool again would" : 'delivered from outside the run: nothing here'} compute it`, `Name an evaluator for it (--evaluator ${name}=<module>#<function>), or rescore the sources that compute their value: ${computed.join(', ') || 'none'}.`);
  }
  if (sources.length === 0) throw new UsageError('the env has no reward source that computes its value (a module, a judge, a service): there is nothing to rescore', 'Name one with --evaluator <source>=<module>#<function>.');
  const rescored = new Set(sources);

  const { initial, patches } = await readEpisodeStates(dir);
  const fresh: RewardLogRecord[] = [];
  const counts = { arrived: 0, failed: 0 };
  let firstFailure: string | undefined;
  const emit = (e: EnvEvent): void => {
    if (!isLoggedReward(e) || !rescored.has(e.source)) return;
    const r = rewardRecord(e as RewardEvent);
    if (r.type === 'reward_arrived' || r.type === 'reward_late') counts.arrived++;
    if (r.type === 'reward_failed') {
      counts.failed++;
      firstFailure ??= `${r.trace_id}: ${r.reason ?? 'failed'}`;
    }
    fresh.push(r);
    if (r.type !== 'reward_expected') options.onProgress?.(counts.arrived + counts.failed);
  };
  // The other sources wait for nothing here: their values are the run's own, copied below. No
  // deadline either: a slow rescore (thousands of judge calls queued) must not impute what it is computing.
  const only: EnvDefinition = { ...definition, rewards: new Map([...definition.rewards].map(([name, d]) => [name, rescored.has(name) ? withoutDeadline(d) : { ...withoutDeadline(d), binding: { kind: 'external' as const } }])) };
  const byEpisode = new Map<number, TrajectoryRecord[]>();
  for (const s of before.steps) {
    const list = byEpisode.get(s.episode);
    if (list) list.push(s);
    else byEpisode.set(s.episode, [s]);
  }
  {
    await using rewards = new EnvRewards(only, { clock: systemClock, emit });
    for (const [episode, steps] of [...byEpisode].sort((a, b) => a[0] - b[0])) {
      options.signal?.throwIfAborted();
      const instance = steps[0]?.instance_id as string;
      let state = initial.get(episode) ?? null;
      rewards.episodeStarted(instance, episode, state);
      for (const s of steps.sort((a, b) => a.step - b.step)) {
        const stateBefore = state;
        for (const patch of patches.get(s.trace_id) ?? []) state = applyPatch(state, patch);
        if (s.status === 'resolved') {
          const immediate = Object.entries(s.rewards).reduce((sum, [name, entry]) => sum + (definition.rewards.get(name)?.binding.kind === 'tool' && typeof entry.value === 'number' ? entry.value * (definition.rewards.get(name)?.weight ?? 1) : 0), 0);
          rewards.stepSettled({ traceId: s.trace_id, instanceId: instance, episode, step: s.step, action: s.action, time: systemClock.now(), params: s.params, ...(s.observation !== undefined ? { observation: s.observation } : {}), stateBefore, stateAfter: state, immediate });
        }
      }
      rewards.episodeEnded(instance, episode);
    }
    await rewards.settle(options.signal);
    options.signal?.throwIfAborted();
  }
  // Nothing computed (the evaluator broken, the judge's server down): no version that would only say so.
  if (counts.failed > 0 && counts.arrived === 0) throw new AgentError('TOOL_FAILED', `every evaluation failed (${counts.failed}); nothing was written. The first: ${firstFailure ?? ''}`, { hint: 'Fix the evaluator (or start the judge\'s server) and rescore again.' });

  // The new version: the run's own records of the sources not computed again, then the new values.
  const kept: RewardLogRecord[] = [];
  await forEachLine(rewardLogFile(dir), (r) => void (rescored.has(r['source'] as string) || kept.push(r as unknown as RewardLogRecord)), { schema: 'reward-log-record', reading: new RecordReading(false) });
  const version = Math.max(...(await rewardVersions(dir))) + 1;
  const file = rewardLogFile(dir, version);
  const tmp = `${file}.tmp`;
  await writeFile(tmp, [...kept, ...fresh].map((r) => `${JSON.stringify(r)}\n`).join(''));
  await rename(tmp, file);

  const was = episodeReturns(before);
  const now = episodeReturns(await openRunRewards(dir, { rewardVersion: version }));
  const changed = [...was].filter(([e, r]) => now.get(e) !== r).map(([episode, r]) => ({ episode, before: r, after: now.get(episode) ?? 0 })).sort((a, b) => a.episode - b.episode);
  const report: RescoreReport = { run_dir: dir, version, file, sources, evaluations: counts, episodes: was.size, changed };
  await writeFile(path.join(dir, `rescore.v${version}.json`), `${JSON.stringify({ ...report, time: new Date().toISOString(), ...(options.evaluators ? { evaluators: options.evaluators } : {}), ...(options.judge ? { judge: options.judge } : {}) }, null, 2)}\n`);
  return report;
}

function withoutDeadline(d: RewardSourceDefinition): RewardSourceDefinition {
  const { deadlineMs: _deadline, fallback: _fallback, ...rest } = d;
  return rest;
}

/** The env's definition with the sources' evaluators or judge model replaced as asked. */
function withOverrides(definition: EnvDefinition, options: RescoreOptions): EnvDefinition {
  const rewards = new Map(definition.rewards);
  for (const [name, { module, exportName }] of Object.entries(options.evaluators ?? {})) {
    const def = rewards.get(name);
    if (!def) throw new UsageError(`--evaluator ${name}=…: the env has no reward source '${name}'`, `Its sources: ${[...rewards.keys()].join(', ')}.`);
    const b = def.binding;
    const kept = isComputed(b) ? { scope: b.scope, policy: b.policy, ...(b.when ? { when: b.when } : {}) } : { scope: 'step' as const, policy: defaultSourcePolicy() };
    rewards.set(name, { ...def, binding: { kind: 'module', module, exportName, ...kept } } satisfies RewardSourceDefinition);
  }
  if (options.judge) {
    const judges = [...rewards.values()].filter((d) => d.binding.kind === 'judge');
    if (judges.length === 0) throw new UsageError('--judge: the env has no LLM-judge reward source', 'Replace a source\'s evaluator with --evaluator <source>=<module>#<function> instead.');
    for (const d of judges) {
      if (d.binding.kind !== 'judge') continue;
      const judge = { ...d.binding.judge, model: options.judge.model, ...(options.judge.baseURL !== undefined ? { baseURL: options.judge.baseURL } : {}) };
      rewards.set(d.name, { ...d, binding: { ...d.binding, judge } });
    }
  }
  return { ...definition, rewards };
}

/** Each episode's initial state, and each trace's committed patches in order, from the run folder. */
async function readEpisodeStates(dir: string): Promise<{ initial: Map<number, JsonValue>; patches: Map<string, Patch[]> }> {
  const states = new Map<string, JsonValue>();
  await forEachLine(path.join(dir, RUN_FILES.states), (r) => void states.set((r as unknown as StateRecord).state_id, (r as unknown as StateRecord).state), { schema: 'state-record', reading: new RecordReading(false) });
  const initial = new Map<number, JsonValue>();
  const patches = new Map<string, Patch[]>();
  await forEachLine(path.join(dir, RUN_FILES.events), (e) => {
    if (e['type'] === 'episode_started') {
      const state = states.get(e['initial_state_id'] as string);
      if (state === undefined) throw new AgentError('RECORD_INVALID', `${path.join(dir, RUN_FILES.states)} has no initial state '${String(e['initial_state_id'])}' (episode ${String(e['episode'])} started from it)`);
      initial.set(e['episode'] as number, state);
    } else if (e['type'] === 'state_committed') {
      const id = e['trace_id'] as string;
      const list = patches.get(id);
      if (list) list.push(e['patch'] as unknown as Patch);
      else patches.set(id, [e['patch'] as unknown as Patch]);
    }
  }, { reading: new RecordReading(false) });
  return { initial, patches };
}

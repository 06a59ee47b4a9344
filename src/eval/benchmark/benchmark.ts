/**
 * `agent benchmark` as a library: run a suite's tasks with a policy (one episode per task and
 * trial, in one run folder of the usual format), score each episode against its task, and compute
 * the metrics with confidence intervals; compare with a baseline report when one is given.
 *
 * Policies: `gold` (replays the task's gold actions, then says its expected outputs: the check
 * that a port is faithful), `random`, or a module `(observation, ctx) => action | null` whose
 * observation carries the task (`observation.task.instruction`).
 */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentEnv } from '../../env/agent-env.js';
import { withTask, type Policy } from '../../run/policy.js';
import { Run, type RunOptions } from '../../run/run.js';
import type { RunEvent, SettledStepEvent } from '../../events/run-events.js';
import { episodeReturns, forEachLine, openRunRewards } from '../../replay/run-rewards.js';
import { RUN_FILES, type EpisodeRecord } from '../../replay/run-writer.js';
import { codesWhere, type ErrorCode } from '../../shared/error-codes.js';
import { AgentError, describeError } from '../../shared/errors.js';
import { importModule } from '../../shared/import-module.js';
import type { JsonValue } from '../../shared/json.js';
import { applyPatch } from '../../state/patch.js';
import { buildPolicyStack } from '../../tools/policy.js';
import { postJson } from '../../reward/service-evaluator.js';
import { bootstrapMean, passHatK, percentile, round, type Estimate } from './stats.js';
import { loadSuite, policyTask, type BenchmarkTask, type Suite } from './suite.js';
import type { LlmPolicySettings } from '../../run/llm-agent.js';
import type { ProgramLimits } from '../../run/program-episode.js';
import type { SandboxMode } from '../../sandbox/sandbox.js';
import { llmPolicy, makePolicy, namedPolicy, type PolicySetup, type RunPolicy } from '../../run/policy-factory.js';
import { servedModel } from '../../llm/vllm.js';
import { PiiIndex } from './pii.js';
import { renderHtmlReport } from './html-report.js';
import { compareReports, loadBaseline } from './baseline.js';
import { resolveSuite } from './suites.js';
import type { BenchmarkReport, MetricEpisode, TrialResult } from './report.js';
import { BENCHMARK_DEFAULTS, RUN_DEFAULTS } from '../../shared/defaults.js';
import { benchmarkJudge, type CheckContext } from './judge.js';
import type { ChatTurn } from '../../llm/chat-turns.js';

export type { BenchmarkReport, MetricEpisode, ToolMetrics, TrialResult } from './report.js';

/** What `runBenchmark` runs: the suite, split and tasks, the policy (a module, a function or an `llm:` model, with a simulated user), trials per task, concurrency, step limit, seed, and where the run folder goes. */
export interface BenchmarkOptions {
  readonly suite: string;
  readonly split?: string;
  readonly tasks?: readonly string[];
  /** `gold`, `random` (default), or a policy module path, or a function. */
  readonly policy?: string | Policy;
  readonly trials?: number;
  readonly concurrency?: number;
  readonly maxSteps?: number;
  readonly seed?: number;
  readonly out?: string;
  readonly toolOptions?: RunOptions['toolOptions'];
  /** Send the run's traces over OTLP (see RunOptions.otel). */
  readonly otel?: RunOptions['otel'];
  /** `llm:<model>`: a simulated user (tau-bench's) for an llm: policy; without one the instruction is the user's only message. */
  readonly user?: string;
  /** `llm:<model>`: a judge the suite's module checks may ask (τ²-bench's NL assertions), served as `llm` says. */
  readonly judge?: string;
  /** Where `llm:` models are served and how they are sampled (default: the provider's API, by model name); `tokens` for token-in, token-out against a vLLM-compatible server. */
  readonly llm?: Omit<LlmPolicySettings, 'user'>;
  /** A `cmd:` policy's limits per episode: wall time, model calls. */
  readonly program?: ProgramLimits;
  /** How the suite's sandbox runs commands: `isolated` (default), or `unsafe-host` (no isolation) only when asked for by name. */
  readonly sandbox?: SandboxMode;
  readonly signal?: AbortSignal;
  /** Metric modules: each exports `(episode: MetricEpisode) => number | Record<string, number>` (default export or `metric`), aggregated with a bootstrap interval. */
  readonly metrics?: readonly string[];
  /** A baseline report to compare with (paired by task and trial): read and checked before the first episode; the comparison goes into the report. */
  readonly baseline?: { readonly file: string; readonly maxRegression?: Readonly<Record<string, number>> };
  /** Sees the run as it goes (progress for a live view), with the score so far. */
  readonly onRun?: (run: Run, scored: () => { readonly done: number; readonly succeeded: number }) => void;
}

/** What a custom success check is given. */
export interface EpisodeOutcome {
  readonly task: BenchmarkTask;
  readonly trial: number;
  readonly finalState: JsonValue;
  readonly steps: readonly SettledStepEvent[];
  readonly reward: number;
  readonly reason: string;
  /** The agent model's conversation (an `llm:` policy), the system prompt first and the user's turns included; absent for policies that do not talk. */
  readonly conversation?: readonly ChatTurn[];
}

const INVALID: ReadonlySet<string> = codesWhere('invalidAction');

/** Runs a suite's tasks with a policy, scores each trial against its gold outcome, and returns the report `agent benchmark` prints. */
export async function runBenchmark(options: BenchmarkOptions): Promise<BenchmarkReport> {
  const trials = options.trials ?? BENCHMARK_DEFAULTS.trials;
  if (!Number.isInteger(trials) || trials < 1) throw new AgentError('BAD_USAGE', `trials must be a whole number ≥ 1 (got ${trials})`);
  const seed = options.seed ?? RUN_DEFAULTS.seed;
  const baseline = options.baseline ? await loadBaseline(options.baseline.file, options.baseline.maxRegression) : undefined;
  const started = Date.now();
  // The env once in-process: its base state, and each task's gold final state.
  // A folder, or a suite shipped with the toolkit by name (tau-bench/airline).
  const suiteDir = resolveSuite(options.suite);
  await using env = await AgentEnv.open(suiteDir, { ...(options.toolOptions ? { toolOptions: options.toolOptions } : {}), ...(options.sandbox ? { sandbox: options.sandbox } : {}) });
  const base = env.definition.initialStates[0] ?? null;
  const suite = await loadSuite(suiteDir, options.split, base, options.tasks ? { only: options.tasks } : {});
  const tasks = suite.tasks;
  const taskOf = (episode: number): BenchmarkTask => tasks[Math.floor(episode / trials)] as BenchmarkTask;
  const policyName = typeof options.policy === 'function' ? options.policy.name || 'custom' : (options.policy ?? 'random');
  const made = await benchmarkPolicy(policyName, options, suite, seed, taskOf);
  const agent = made.agent;
  if (options.llm?.tokens && !agent && !made.driver) throw new AgentError('BAD_USAGE', `--tokens goes with an llm: or cmd: policy, or gold (got --policy ${policyName})`, { hint: 'Pass --policy llm:<model> (or cmd:<command line>, or gold) --llm-base-url <vLLM server> --tokens.' });
  if (options.user !== undefined && !agent) throw new AgentError('BAD_USAGE', '--user needs an llm: policy (the simulated user talks to a model agent)', { hint: 'Pass --policy llm:<model> with --user llm:<model>.' });
  const judge = options.judge === undefined ? undefined : await benchmarkJudge(options.judge, options.llm, options.signal);
  const contextOf = (episode: number): CheckContext => judge?.context(episode) ?? (options.signal ? { signal: options.signal } : {});
  const gold = await goldStates(env, suite, options.signal);
  const taskFor = (episode: number): ReturnType<typeof policyTask> => policyTask(taskOf(episode));
  const driver = made.driver;
  const policy: RunPolicy = { ...made, policy: withTask(made.policy, taskFor), ...(driver ? { driver: (episode: number) => driver(episode, taskFor(episode)) } : {}) };
  const maxSteps = options.maxSteps ?? Math.max(30, ...tasks.map((t) => t.actions.length + 2));
  const run = await Run.prepare({
    env: suite.envDir,
    episodes: tasks.length * trials,
    concurrency: options.concurrency ?? BENCHMARK_DEFAULTS.concurrency,
    maxSteps,
    policy,
    seed,
    ...(options.out ? { out: options.out } : {}),
    ...(options.toolOptions ? { toolOptions: options.toolOptions } : {}),
    ...(options.otel ? { otel: options.otel } : {}),
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
    initialStates: tasks.flatMap((t) => Array.from({ length: trials }, () => t.initialState)),
    onEpisodeEnd: (episode, state) => finalsLive.set(episode, state),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const steps = new Map<number, SettledStepEvent[]>();
  const finished = new Map<number, Extract<RunEvent, { type: 'episode_finished' }>>();
  // Scored as each episode ends, for the live view (the report scores again from the run folder).
  const finalsLive = new Map<number, JsonValue>();
  const live = { done: 0, succeeded: 0 };
  run.events.on('trace_settled', (e) => {
    const list = steps.get(e.episode) ?? [];
    list.push(e);
    steps.set(e.episode, list);
  });
  const checks = await successChecks(tasks);
  run.events.on('episode_finished', (e) => {
    finished.set(e.episode, e);
    const task = taskOf(e.episode);
    const conversation = agent?.conversation(e.episode);
    const outcome: EpisodeOutcome = { task, trial: e.episode % trials, finalState: finalsLive.get(e.episode) ?? task.initialState, steps: steps.get(e.episode) ?? [], reward: e.reward, reason: e.reason, ...(conversation ? { conversation } : {}) };
    finalsLive.delete(e.episode);
    void score(task, outcome, gold.get(task.id) ?? null, checks, contextOf(e.episode)).then(
      (r) => {
        live.done++;
        if (r.success) live.succeeded++;
      },
      () => undefined,
    );
  });
  options.onRun?.(run, () => ({ ...live }));
  const summary = await run.execute(options.signal);
  const dir = run.dir as string;
  if (summary.status !== 'completed') throw new AgentError('INTERRUPTED', `the benchmark was interrupted; its run folder is ${dir}`);
  const finals = await finalStates(dir, tasks, trials);
  // An episode's reward once its delayed values have landed (a judge's verdict comes after the episode ends).
  const returns = episodeReturns(await openRunRewards(dir));
  const results = new Map<string, TrialResult[]>(tasks.map((t) => [t.id, []]));
  const piiIndexes = new Map<JsonValue, PiiIndex>();
  const metricEpisodes: MetricEpisode[] = [];
  for (let episode = 0; episode < tasks.length * trials; episode++) {
    const task = taskOf(episode);
    const end = finished.get(episode);
    const episodeSteps = steps.get(episode) ?? [];
    const reward = returns.get(episode) ?? end?.reward ?? 0;
    const finalState = finals.get(episode) ?? task.initialState;
    const conversation = agent?.conversation(episode);
    const outcome: EpisodeOutcome = { task, trial: episode % trials, finalState, steps: episodeSteps, reward, reason: end?.reason ?? 'interrupted', ...(conversation ? { conversation } : {}) };
    const { reward: taskReward, ...scored } = await score(task, outcome, gold.get(task.id) ?? null, checks, contextOf(episode));
    const usage = agent?.usage(episode);
    const toolUsd = episodeSteps.reduce((sum, st) => sum + (env.definition.actions.get(st.action)?.policy.costUsd ?? 0), 0);
    let index = piiIndexes.get(task.initialState);
    if (!index) piiIndexes.set(task.initialState, (index = new PiiIndex(task.initialState)));
    const pii = index.scan(episodeSteps, task.userId);
    metricEpisodes.push({ task: task.id, trial: episode % trials, success: scored.success, reward: taskReward ?? reward, steps: episodeSteps, final_state: finalState });
    (results.get(task.id) as TrialResult[]).push({
      trial: episode % trials,
      episode,
      // A check that scores the task (τ²'s evaluator) gives the trial's reward; otherwise the episode's return.
      reward: round(taskReward ?? reward),
      steps: end?.steps ?? episodeSteps.length,
      reason: outcome.reason,
      ...scored,
      ...(usage || toolUsd > 0 ? { cost: { input_tokens: usage?.inputTokens ?? 0, output_tokens: usage?.outputTokens ?? 0, usd: usage?.usd === null ? null : round((usage?.usd ?? 0) + toolUsd), tool_usd: round(toolUsd) } } : {}),
      ...(pii.length > 0 ? { pii } : {}),
      ...(end?.error ? { error: `${end.error.code}: ${end.error.message}` } : {}),
    });
  }
  // metricEpisodes is in episode order: custom.values[episode] is that episode's.
  const custom = await customMetrics(options.metrics ?? [], metricEpisodes, seed);
  let report: BenchmarkReport = {
    schema_version: 1,
    suite: suite.name,
    split: suite.split,
    policy: policyName,
    trials,
    seed,
    run_dir: dir,
    ...(judge ? { judge: { model: options.judge as string, ...judge.usage } } : {}),
    started_at: new Date(started).toISOString(),
    duration_ms: Date.now() - started,
    metrics: {
      ...metricsOf(tasks, results, steps, finished, trials, seed, suite, (episode) => agent?.invalidCalls(episode) ?? 0),
      // tau-bench's scoring passes an agent that changes nothing on every task whose gold leaves the state as it was and says nothing.
      do_nothing_floor: await doNothingFloor(tasks, gold, checks),
      ...(custom ? { custom: custom.estimates } : {}),
    },
    // Each trial keeps its own metric values: `agent export --verdict` makes one the final reward.
    tasks: tasks.map((t) => ({ id: t.id, trials: (results.get(t.id) as TrialResult[]).map((x) => (custom ? { ...x, metrics: custom.values[x.episode] as Record<string, number> } : x)) })),
  };
  if (baseline) report = { ...report, baseline: compareReports(report, baseline) };
  await writeFile(path.join(dir, 'benchmark.json'), `${JSON.stringify(report, null, 2)}\n`);
  const latencies: Record<string, number[]> = {};
  for (const list of steps.values()) for (const s of list) (latencies[s.action] ??= []).push(s.duration_ms);
  await writeFile(path.join(dir, 'benchmark.html'), await renderHtmlReport(report, latencies));
  if (agent) await writeFile(path.join(dir, 'conversations.jsonl'), agent.conversations().map((c) => `${JSON.stringify(c)}\n`).join(''));
  // The report scores what completed; the benchmark still fails, as the run did.
  const stop = summary.stopped_by;
  if (stop !== undefined) throw new AgentError(stop.code as ErrorCode, `${summary.problem ?? stop.message}; the report of what completed is ${path.join(dir, 'benchmark.json')}`, { hint: stop.hint ?? 'Fix what stopped it and run the benchmark again.' });
  return report;
}

/** What a model agent is told first: the suite's policy document, and how its text and tool calls are read. */
export async function agentSystemPrompt(suite: Suite): Promise<string> {
  const policyDoc = path.join(suite.dir, 'policy.md');
  const rules = existsSync(policyDoc) ? await readFile(policyDoc, 'utf8') : '';
  return [rules.trim(), 'Act through the tools; what you write as plain text is said to the user. One tool call per turn is best; wait for its result.'].filter(Boolean).join('\n\n');
}

/** The benchmark's policy: `gold` (its tasks' gold actions; in token mode rendered as the served model's turns), or what makePolicy makes of the rest; an `llm:` agent with the suite's rules and the simulated user. */
async function benchmarkPolicy(policyName: string, options: BenchmarkOptions, suite: Suite, seed: number, taskOf: (episode: number) => BenchmarkTask): Promise<RunPolicy> {
  // The report writes every episode's conversation, and a judge reads it: the agent keeps them.
  const context: PolicySetup = { system: () => agentSystemPrompt(suite), seed, keepConversations: true, llm: { ...options.llm, ...(options.user !== undefined ? { user: options.user } : {}) }, ...(options.program ? { program: options.program } : {}), ...(options.signal ? { signal: options.signal } : {}) };
  if (policyName !== 'gold') return makePolicy(typeof options.policy === 'function' ? options.policy : policyName, context);
  // Gold in token mode: the gold actions as the model's turns, rendered by the server's template (data for a supervised warm start).
  if (options.llm?.tokens === true) {
    if (options.llm.baseURL === undefined) throw new AgentError('BAD_USAGE', '--policy gold --tokens renders the gold actions through a vLLM-compatible server: it needs --llm-base-url', { hint: 'Pass --llm-base-url http://<host>:8000/v1 (the server whose chat template renders them), or drop --tokens.' });
    return llmPolicy(await servedModel(options.llm.baseURL, options.signal), 'gold', { ...context, gold: goldPolicy(taskOf) });
  }
  return namedPolicy(goldPolicy(taskOf), 'gold');
}

/** Gold actions (the user's too, as the user's) then, if the task expects outputs, a `respond` that says them: what a perfect agent does. */
function goldPolicy(taskOf: (episode: number) => BenchmarkTask): Policy {
  return (obs) => {
    const task = taskOf(obs.episode);
    const action = task.actions[obs.step];
    if (action) return { name: action.name, params: action.params, ...(action.actor ? { actor: action.actor } : {}) };
    if (obs.step === task.actions.length && task.outputs.length > 0 && obs.actions.some((a) => a.name === 'respond')) return { name: 'respond', params: { content: task.outputs.join(' ') } };
    return null;
  };
}

/**
 * The share of tasks an agent that does nothing passes: a state_match task whose gold leaves the
 * state as it was and says nothing, a module check that passes an episode with no step (τ²-bench
 * passes several so), never a reward threshold (there is no episode to read a reward from).
 */
async function doNothingFloor(tasks: readonly BenchmarkTask[], gold: Map<string, JsonValue>, checks: Map<string, Check>): Promise<number> {
  let passed = 0;
  for (const t of tasks) {
    if (t.success.kind === 'state_match') {
      if (t.outputs.length === 0 && equalJson(gold.get(t.id) ?? null, t.initialState)) passed++;
    } else if (t.success.kind === 'module') {
      const idle: EpisodeOutcome = { task: t, trial: 0, finalState: t.initialState, steps: [], reward: 0, reason: 'policy_stop' };
      // A check written for real episodes may not take an empty one: that task is not passed by doing nothing.
      if (await score(t, idle, null, checks).then((r) => r.success, () => false)) passed++;
    }
  }
  return round(passed / tasks.length);
}

/** Each state_match task's gold final state: its gold actions replayed on a fresh copy of its initial state. */
async function goldStates(env: AgentEnv, suite: Suite, signal: AbortSignal | undefined): Promise<Map<string, JsonValue>> {
  const out = new Map<string, JsonValue>();
  for (const task of suite.tasks) {
    if (task.success.kind !== 'state_match') continue;
    const agent = env.createInstance({ id: `gold-${task.id}` });
    await agent.reset(task.initialState, signal ? { signal } : {});
    for (const [i, action] of task.actions.entries()) {
      const step = await agent.step(action, signal ? { signal } : {});
      if (step.info.status !== 'resolved') {
        throw new AgentError('DEFINITION_INVALID', `task '${task.id}': gold action ${i} (${action.name}) fails: ${step.info.error?.message ?? step.info.status}`, { hint: 'Fix the task\'s gold actions: they must replay on the env.' });
      }
      if (step.done) break;
    }
    out.set(task.id, agent.state);
    await agent.terminate();
    env.release(agent.id);
    await env.store.drop(agent.id);
  }
  return out;
}

/** Each episode's final state, from the run folder: its initial state with episodes.jsonl's final patch. */
async function finalStates(dir: string, tasks: readonly BenchmarkTask[], trials: number): Promise<Map<number, JsonValue>> {
  const out = new Map<number, JsonValue>();
  await forEachLine(path.join(dir, RUN_FILES.episodes), (r) => {
    const e = r as unknown as EpisodeRecord;
    const task = tasks[Math.floor(e.episode / trials)] as BenchmarkTask;
    out.set(e.episode, applyPatch(task.initialState, e.final_patch));
  });
  return out;
}

/**
 * What a module check may answer beside a plain verdict: the task's own score (the trial's reward in
 * the report, as τ²-bench's evaluator scores it), the score by component, what it could not score,
 * and details for the report.
 */
export interface CheckResult {
  readonly success: boolean;
  readonly reward?: number;
  readonly components?: Readonly<Record<string, number>>;
  readonly not_scored?: readonly string[];
  readonly details?: Readonly<Record<string, JsonValue>>;
}
type Check = (outcome: EpisodeOutcome, context: CheckContext) => boolean | CheckResult | Promise<boolean | CheckResult>;

async function successChecks(tasks: readonly BenchmarkTask[]): Promise<Map<string, Check>> {
  const out = new Map<string, Check>();
  for (const t of tasks) {
    if (t.success.kind !== 'module') continue;
    const key = `${t.success.module}#${t.success.exportName}`;
    if (out.has(key)) continue;
    const mod = (await importModule(t.success.module)) as Record<string, unknown>;
    const fn = mod[t.success.exportName];
    if (typeof fn !== 'function') throw new AgentError('DEFINITION_INVALID', `${t.success.module} has no function export '${t.success.exportName}'`, { hint: 'Export a function (outcome, context) => boolean | {success, components?, not_scored?, details?}.' });
    out.set(key, fn as Check);
  }
  return out;
}

/** What the agent said: the content of its `respond` calls, as tau-bench reads it (lower case, commas dropped). */
function said(steps: readonly SettledStepEvent[]): string[] {
  return steps.filter((s) => s.action === 'respond' && typeof s.params['content'] === 'string').map((s) => (s.params['content'] as string).toLowerCase().replace(/,/g, ''));
}

type Scored = Pick<TrialResult, 'success' | 'checks' | 'components' | 'not_scored' | 'details'> & { readonly reward?: number };

async function score(task: BenchmarkTask, outcome: EpisodeOutcome, gold: JsonValue, checks: Map<string, Check>, context: CheckContext = {}): Promise<Scored> {
  const c = task.success;
  if (c.kind === 'reward_at_least') return { success: outcome.reward >= c.value };
  if (c.kind === 'module') {
    const check = checks.get(`${c.module}#${c.exportName}`) as Check;
    try {
      const verdict = await check(outcome, context);
      if (typeof verdict === 'boolean') return { success: verdict };
      if (typeof verdict !== 'object' || verdict === null || typeof verdict.success !== 'boolean') throw new TypeError(`it answered ${JSON.stringify(verdict)}, not a boolean or {success: boolean, components?, not_scored?, details?}`);
      if (verdict.reward !== undefined && (typeof verdict.reward !== 'number' || !Number.isFinite(verdict.reward))) throw new TypeError(`its reward is ${String(verdict.reward)}, not a finite number`);
      return {
        success: verdict.success,
        ...(verdict.reward !== undefined ? { reward: verdict.reward } : {}),
        ...(verdict.components ? { components: verdict.components } : {}),
        ...(verdict.not_scored && verdict.not_scored.length > 0 ? { not_scored: verdict.not_scored } : {}),
        ...(verdict.details ? { details: verdict.details } : {}),
      };
    } catch (err) {
      throw new AgentError('DEFINITION_INVALID', `the success check of task '${task.id}' threw: ${describeError(err)}`, { cause: err });
    }
  }
  const stateMatch = equalJson(outcome.finalState, gold);
  const words = said(outcome.steps);
  const missing = task.outputs.filter((o) => !words.some((w) => w.includes(o.toLowerCase())));
  return { success: stateMatch && missing.length === 0, checks: { state_match: stateMatch, outputs_missing: missing } };
}

/** Deep equality of two JSON values, key order aside (shared subtrees compare at once). */
export function equalJson(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as JsonValue[]).length && a.every((x, i) => equalJson(x, (b as JsonValue[])[i] as JsonValue));
  const ka = Object.keys(a);
  const ob = b as Record<string, JsonValue>;
  return ka.length === Object.keys(ob).length && ka.every((k) => Object.prototype.hasOwnProperty.call(ob, k) && equalJson(a[k] as JsonValue, ob[k] as JsonValue));
}

/**
 * The built-in metrics. Each is a value per episode (task and trial), aggregated over tasks with a
 * bootstrap interval; pass^k and the per-tool figures are over all calls.
 */
function metricsOf(
  tasks: readonly BenchmarkTask[],
  results: ReadonlyMap<string, readonly TrialResult[]>,
  steps: ReadonlyMap<number, readonly SettledStepEvent[]>,
  finished: ReadonlyMap<number, Extract<RunEvent, { type: 'episode_finished' }>>,
  trials: number,
  seed: number,
  suite: Suite,
  /** Calls a policy refused itself before they reached the env (the llm: agent's invalid calls). */
  refused: (episode: number) => number,
): Omit<BenchmarkReport['metrics'], 'do_nothing_floor' | 'custom'> {
  const per = tasks.map((t) => results.get(t.id) ?? []);
  const passHat: Record<string, number> = {};
  for (let k = 1; k <= trials; k++) passHat[String(k)] = passHatK(per.map((r) => r.map((x) => x.success)), k);
  const tools = new Map<string, { calls: number; ok: number; ms: number[] }>();
  const sources = new Set<string>();
  /** Per episode: calls, calls that worked, each source's reward. */
  const byEpisode = new Map<number, { calls: number; ok: number; rewards: Map<string, number> }>();
  for (const [episode, list] of steps) {
    const e = { calls: 0, ok: 0, rewards: new Map<string, number>() };
    byEpisode.set(episode, e);
    for (const s of list) {
      const failed = s.status === 'failed' || (suite.errorObservation !== undefined && typeof s.observation === 'string' && suite.errorObservation.test(s.observation));
      const t = tools.get(s.action) ?? { calls: 0, ok: 0, ms: [] };
      t.calls++;
      if (!failed) t.ok++;
      t.ms.push(s.duration_ms);
      tools.set(s.action, t);
      e.calls++;
      if (!failed) e.ok++;
      for (const [source, entry] of Object.entries(s.rewards)) {
        if (typeof entry.value !== 'number') continue;
        sources.add(source);
        e.rewards.set(source, (e.rewards.get(source) ?? 0) + entry.value);
      }
    }
  }
  const of = (pick: (x: TrialResult) => number | undefined, k: number): Estimate =>
    bootstrapMean(
      per.map((r) => r.flatMap((x) => pick(x) ?? [])),
      seed + k,
    );
  const calls = (x: TrialResult): number => byEpisode.get(x.episode)?.calls ?? 0;
  // An action the env refused at dispatch (unknown, disabled, bad params) ends its episode as a
  // policy error; the llm: agent checks its calls first and counts the ones it had to take back.
  const invalid = (x: TrialResult): number => {
    const e = finished.get(x.episode);
    return (e?.reason === 'policy_error' && e.error && INVALID.has(e.error.code) ? 1 : 0) + refused(x.episode);
  };
  const costs = per.flat().filter((t) => t.cost);
  return {
    success_rate: of((x) => (x.success ? 1 : 0), 0),
    pass_hat_k: passHat,
    reward: of((x) => x.reward, 1),
    reward_by_source: Object.fromEntries([...sources].map((source, i) => [source, of((x) => byEpisode.get(x.episode)?.rewards.get(source) ?? 0, 10 + i)])),
    steps_per_episode: of((x) => x.steps, 2),
    ...(costs.length > 0
      ? {
          cost: {
            usd_per_episode: costs.every((t) => t.cost?.usd !== null) ? of((x) => x.cost?.usd ?? undefined, 3) : null,
            tokens_per_episode: of((x) => (x.cost ? x.cost.input_tokens + x.cost.output_tokens : undefined), 4),
          },
        }
      : {}),
    pii_leak_rate: of((x) => (x.pii && x.pii.length > 0 ? 1 : 0), 5),
    tool_success_rate: of((x) => (calls(x) === 0 ? undefined : (byEpisode.get(x.episode)?.ok ?? 0) / calls(x)), 6),
    invalid_action_rate: of((x) => (calls(x) + invalid(x) === 0 ? undefined : invalid(x) / (calls(x) + invalid(x))), 7),
    tools: Object.fromEntries(
      [...tools].map(([name, t]) => {
        const ms = t.ms.sort((a, b) => a - b);
        return [name, { calls: t.calls, success_rate: round(t.ok / t.calls), latency_ms: { p50: round(percentile(ms, 50), 3), p95: round(percentile(ms, 95), 3), p99: round(percentile(ms, 99), 3) } }];
      }),
    ),
  };
}

async function metricModule(file: string): Promise<(e: MetricEpisode) => unknown> {
  const mod = (await importModule(path.resolve(file))) as Record<string, unknown>;
  const fn = (mod['metric'] ?? mod['default']) as ((e: MetricEpisode) => unknown) | undefined;
  if (typeof fn !== 'function') throw new AgentError('BAD_USAGE', `metric module ${file} exports no function (default or 'metric')`, { hint: 'Export (episode) => number | Record<string, number>.' });
  return fn;
}

/** A metric as a service: each episode POSTed as JSON, the answer a number or a record of numbers (a 5xx or a lost connection is retried). */
function metricService(url: string, name: string): (e: MetricEpisode) => Promise<unknown> {
  const stack = buildPolicyStack(`metric service '${name}'`, { timeoutMs: 60_000, retry: { maxAttempts: 3, initialDelayMs: 200, maxDelayMs: 2_000 } });
  return (episode) => stack.execute((signal) => postJson(url, episode, { who: `metric service '${name}'`, ...(process.env['AGENT_METRIC_TOKEN'] ? { tokenEnv: 'AGENT_METRIC_TOKEN' } : {}) }, signal()), AbortSignal.timeout(300_000));
}

/** A metric service's name in the report: the last segment of its path, else its host. */
function metricServiceName(url: string): string {
  const u = new URL(url);
  return u.pathname.split('/').filter(Boolean).pop() ?? u.hostname;
}

/**
 * The metric modules (or services): each computes a value per episode (task and trial), a number or a record of
 * numbers, and the hub aggregates each over tasks with a bootstrap interval. A module that throws
 * or answers something else is an error naming it.
 */
async function customMetrics(
  modules: readonly string[],
  episodes: readonly MetricEpisode[],
  seed: number,
): Promise<{ estimates: Record<string, Estimate>; values: Record<string, number>[] } | undefined> {
  if (modules.length === 0) return undefined;
  const custom: Record<string, Estimate> = {};
  const values = episodes.map((): Record<string, number> => ({}));
  for (const file of modules) {
    const service = /^https?:\/\//.test(file);
    const name = service ? metricServiceName(file) : path.basename(file).replace(/\.[cm]?[jt]s$/, '');
    const fn = service ? metricService(file, name) : await metricModule(file);
    // Per key, per task: the values of its trials.
    const byKey = new Map<string, Map<string, number[]>>();
    for (const [index, e] of episodes.entries()) {
      let value: unknown;
      try {
        value = await fn(e);
      } catch (err) {
        throw new AgentError('BAD_USAGE', `metric '${name}' ${service ? 'failed' : 'threw'} on ${e.task} (trial ${e.trial}): ${describeError(err)}`, { cause: err, hint: service ? `Check the metric service at ${file}.` : `Fix ${file}.` });
      }
      const entries = typeof value === 'number' ? [[name, value] as const] : typeof value === 'object' && value !== null ? Object.entries(value).map(([k, v]) => [`${name}.${k}`, v] as const) : [];
      if (entries.length === 0 || entries.some(([, v]) => typeof v !== 'number' || !Number.isFinite(v))) {
        throw new AgentError('BAD_USAGE', `metric '${name}' returned ${JSON.stringify(value)} for ${e.task}, not a number or a record of numbers`, { hint: `Fix ${file}.` });
      }
      for (const [key, v] of entries) {
        (values[index] as Record<string, number>)[key] = v as number;
        const tasks = byKey.get(key) ?? new Map<string, number[]>();
        byKey.set(key, tasks);
        const list = tasks.get(e.task) ?? [];
        list.push(v as number);
        tasks.set(e.task, list);
      }
    }
    for (const [key, tasks] of byKey) custom[key] = bootstrapMean([...tasks.values()], seed + 4);
  }
  return { estimates: custom, values };
}


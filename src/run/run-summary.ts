/**
 * `summary.json`: what a run comes to, built from its live statistics, its env's rewards and how
 * it ended. One place for every driver (local, durable, coordinator), so their summaries agree.
 * And `run.json`, the manifest the folder opens with.
 */
import type { AgentEnv } from '../env/agent-env.js';
import type { EpisodeEndReason, RunConfig } from '../events/run-events.js';
import type { EvaluatorStats } from '../reward/evaluators.js';
import type { SourceSla } from '../reward/ledger.js';
import { isComputed, type EnvDefinition, type RewardBinding } from '../schema/definition.js';
import type { AgentError } from '../shared/errors.js';
import type { RunningCall } from '../tools/router.js';
import type { RunWriter } from '../replay/run-writer.js';
import type { ModelTurns, RunProgress } from './run-stats.js';
import type { TelemetrySummary } from '../observe/telemetry.js';

/** A finished run's summary.json: status, timing, config, episodes by how they ended, steps, per-tool figures, rewards per source. */
export interface RunSummary {
  readonly schema_version: 1;
  readonly run_id: string;
  readonly env: string;
  readonly status: 'completed' | 'interrupted';
  readonly started_at: string;
  readonly finished_at: string;
  readonly duration_ms: number;
  readonly config: RunConfig;
  readonly episodes: { readonly requested: number; readonly finished: number; readonly by_reason: Readonly<Partial<Record<EpisodeEndReason, number>>> };
  readonly steps: { readonly total: number; readonly failed: number; readonly per_second: number };
  readonly tools: Readonly<Record<string, { readonly calls: number; readonly failed: number; readonly mean_ms: number; readonly errors: Readonly<Record<string, number>> }>>;
  readonly rewards: {
    /** Over the episodes that ran to an end (`episodes` of them; interrupted ones are left out): null when none did. */
    readonly per_episode: { readonly episodes: number; readonly mean: number | null; readonly min: number | null; readonly max: number | null };
    readonly by_source: Readonly<Record<string, SourceSummary>>;
  };
  readonly loop_blocked: number;
  /** Records the run folder could not write (a full disk, a value that is not JSON): never dropped silently. */
  readonly records_lost?: { readonly records: number; readonly reason: string };
  /** Calls whose handler ignored its AbortSignal and was still running when the run closed. */
  readonly abandoned_calls?: readonly { readonly tool: string; readonly trace_id: string }[];
  /** Set when the run completed but could not have worked (every step failed, …), or stopped on a store failure. */
  readonly problem?: string;
  /** The error that stopped the run from starting more episodes (the inference server of an llm: policy down after its retries: LLM_UNAVAILABLE); the episodes in flight failed with it. */
  readonly stopped_by?: { readonly code: string; readonly message: string; readonly hint?: string };
  /** A distributed run: the workers that sent events, and writes refused because their worker had lost its lease. */
  readonly distributed?: { readonly queue: string; readonly workers: readonly string[]; readonly fenced_writes: number };
  /** A run sent over OTLP (OpenTelemetry): where its spans and metrics went, and what never reached the collector. */
  readonly telemetry?: TelemetrySummary;
  /** The policy's model calls, when it made any: how many, how many failed, and the token sequences their episodes fell into. */
  readonly model_turns?: ModelTurns;
}

/** One reward source over the run: values that arrived, their mean, and for delayed sources the SLA and what computing them cost. */
export interface SourceSummary {
  readonly binding: RewardBinding['kind'];
  readonly arrived: number;
  readonly pending: number;
  /** Mean of the values that arrived (late ones included); null when none did. */
  readonly mean: number | null;
  readonly sla?: SourceSla;
  /** Module and judge sources: calls made, failures, and for a judge tokens and cost. */
  readonly calls?: EvaluatorStats;
}

export interface SummaryInput {
  readonly runId: string;
  readonly status: RunSummary['status'];
  readonly started: number;
  readonly finished: number;
  readonly config: RunConfig;
  readonly progress: RunProgress;
  readonly env: AgentEnv;
  /** Episodes that ran to an end (not interrupted): the per-episode rewards cover these. */
  readonly counted: ReadonlySet<number>;
  /** Calls whose handler ignored its signal and still ran when the env closed. */
  readonly abandoned: readonly RunningCall[];
  /** The store failure the run stopped on, and the command that resumes it. */
  readonly failure?: AgentError;
  readonly resume?: string;
  readonly telemetry?: TelemetrySummary;
}

export function buildSummary(o: SummaryInput): RunSummary {
  const p = o.progress;
  const { failure } = o;
  const problem = failure ? `${failure.message}; the run stopped: ${failure.code === 'STATE_CORRUPT' ? `${failure.hint} Then resume: ${o.resume ?? ''}` : `it can be resumed: ${o.resume ?? ''}`}` : o.status === 'completed' ? problemOf(p) : undefined;
  return {
    schema_version: 1,
    run_id: o.runId,
    env: o.config.env,
    status: o.status,
    started_at: new Date(o.started).toISOString(),
    finished_at: new Date(o.finished).toISOString(),
    duration_ms: Math.round(o.finished - o.started),
    config: o.config,
    episodes: { requested: o.config.episodes, finished: p.episodes_done, by_reason: p.episodes_by_reason },
    steps: { total: p.steps, failed: p.failed_steps, per_second: round(p.steps_per_second, 2) },
    tools: Object.fromEntries(Object.entries(p.tools).map(([name, t]) => [name, { calls: t.calls, failed: t.failed, mean_ms: t.calls === 0 ? 0 : round(t.total_ms / t.calls, 3), errors: t.errors }])),
    rewards: { per_episode: perEpisode(o.env, p.episode_rewards, o.counted), by_source: sourceSummaries(o.env, p) },
    loop_blocked: p.loop_blocked.length,
    ...(o.abandoned.length > 0 ? { abandoned_calls: o.abandoned.map((c) => ({ tool: c.tool, trace_id: c.traceId })) } : {}),
    ...(problem ? { problem } : {}),
    ...(p.model_turns ? { model_turns: p.model_turns } : {}),
    ...(o.telemetry ? { telemetry: o.telemetry } : {}),
  };
}

/**
 * Reward per episode, over the episodes that ran to an end (an interrupted one was cut short and
 * would drag the mean down). With delayed sources, each step counts what has arrived or been
 * imputed by now, not only what was known when its episode ended.
 */
function perEpisode(env: AgentEnv, r: RunProgress['episode_rewards'], counted: ReadonlySet<number>): RunSummary['rewards']['per_episode'] {
  const rewards = env.rewards;
  if (!rewards.active) return r.count === 0 ? NO_EPISODE : { episodes: r.count, mean: round(r.sum / r.count), min: round(r.min), max: round(r.max) };
  const totals = new Map<number, number>([...counted].map((e) => [e, 0]));
  for (const step of rewards.ledger.steps()) {
    const t = totals.get(step.episode);
    if (t !== undefined) totals.set(step.episode, t + (rewards.reward(step.traceId) ?? 0));
  }
  // Episodes the live ledger no longer holds step by step (a long run's oldest): their returns.
  for (const [episode, r] of rewards.ledger.droppedReturns()) {
    const t = totals.get(episode);
    if (t !== undefined) totals.set(episode, t + r);
  }
  const all = [...totals.values()];
  if (all.length === 0) return NO_EPISODE;
  return { episodes: all.length, mean: round(all.reduce((a, b) => a + b, 0) / all.length), min: round(Math.min(...all)), max: round(Math.max(...all)) };
}

/** No episode ran to an end: there is no reward per episode to say (0 would be a claim). */
const NO_EPISODE = { episodes: 0, mean: null, min: null, max: null } as const;

function sourceSummaries(env: AgentEnv, p: RunProgress): Record<string, SourceSummary> {
  const sla = env.rewards.sla();
  const calls = env.rewards.sourceStats();
  return Object.fromEntries(
    [...env.definition.rewards.values()].map((def) => {
      const s = p.rewards_by_source[def.name] ?? { arrived: 0, sum: 0 };
      const summary: SourceSummary = {
        binding: def.binding.kind,
        arrived: s.arrived,
        pending: sla[def.name]?.pending ?? 0,
        mean: s.arrived === 0 ? null : round(s.sum / s.arrived),
        ...(sla[def.name] ? { sla: sla[def.name] } : {}),
        ...(calls[def.name] ? { calls: calls[def.name] } : {}),
      };
      return [def.name, summary];
    }),
  );
}

export function withLoss(summary: RunSummary, loss: RunWriter['loss']): RunSummary {
  return loss ? { ...summary, records_lost: loss, problem: `${loss.records} record(s) could not be written to the run folder: ${loss.reason}` } : summary;
}

/** Six decimal places: enough for any reward scale, without float noise in summaries. */
function round(n: number, digits = 6): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Why a completed run could not have worked, or undefined. `agent run` exits 1 on one. */
function problemOf(p: RunProgress): string | undefined {
  const finished = p.episodes_done;
  if (finished === 0) return undefined;
  const byReason = p.episodes_by_reason;
  if (p.steps > 0 && p.failed_steps === p.steps) {
    const [code, n] = Object.entries(p.errors).sort((a, b) => b[1] - a[1])[0] ?? ['?', 0];
    return `every step failed (${p.steps} of ${p.steps}; ${code} ×${n}${p.first_error ? `: ${p.first_error}` : ''})`;
  }
  if ((byReason.no_actions ?? 0) === finished && p.steps === 0) return 'no action was ever enabled: every episode ended before its first step (check enabled_if against the initial states)';
  if ((byReason.policy_error ?? 0) === finished) return `every episode ended in a policy error${p.first_policy_error ? `: ${p.first_policy_error}` : ''}`;
  return undefined;
}

export interface ManifestFacts {
  readonly runId: string;
  readonly definition: EnvDefinition;
  readonly started: number;
  readonly config: RunConfig;
  /** The run server's port, when it serves. */
  readonly port?: number;
  /** A durable run's store, its password redacted. */
  readonly store?: string;
  /** When this process resumed the run. */
  readonly resumedAt?: number;
}

/** `run.json`: what `agent reward` and `agent export` need to work on the folder once the run's process is gone. */
export function runManifest(f: ManifestFacts): object {
  const def = f.definition;
  return {
    schema_version: 1,
    run_id: f.runId,
    env: def.name,
    env_dir: def.dir,
    started_at: new Date(f.started).toISOString(),
    pid: process.pid,
    ...(f.port !== undefined ? { port: f.port } : {}),
    ...(f.store !== undefined ? { store: f.store } : {}),
    ...(f.resumedAt !== undefined ? { resumed_at: new Date(f.resumedAt).toISOString() } : {}),
    config: f.config,
    reward_sources: Object.fromEntries(
      [...def.rewards.values()].map((r) => [
        r.name,
        {
          binding: r.binding.kind,
          schema: r.schema,
          delay_ms: r.delayMs,
          ...(r.deadlineMs !== undefined ? { deadline_ms: r.deadlineMs } : {}),
          aggregation: r.aggregation,
          weight: r.weight,
          ...(r.fallback ? { fallback: r.fallback } : {}),
          ...(isComputed(r.binding) ? { scope: r.binding.scope } : {}),
        },
      ]),
    ),
  };
}

/**
 * Plain progress lines, for logs and pipes (no TTY): one line when the run starts, one per
 * finished episode, a progress line every few seconds while calls are in flight, warnings for
 * failures and blocked event loops (on stderr), and a closing summary.
 */
import type { RunSummary } from '../run/run-summary.js';
import type { RunEvent } from '../events/run-events.js';
import { oneLine } from '../shared/errors.js';
import { formatDuration, formatNumber } from './format.js';
import type { Output, RunSource } from './run-source.js';
import { RUN_DEFAULTS } from '../shared/defaults.js';
import { EpisodeReturns, returnText } from './episode-returns.js';

export interface PlainReporterOptions {
  /** Progress: the run's header, each episode's line, a progress line every `intervalMs`. */
  readonly out: Output;
  /** Warnings. */
  readonly err: Output;
  /** The summary the run comes to (default: `out`): a command's result, where progress is not. */
  readonly summary?: Output;
  /** How often to print a progress line (ms). */
  readonly intervalMs?: number;
}

export function attachPlainReporter(run: RunSource, { out, err, summary: result = out, intervalMs = 5_000 }: PlainReporterOptions): { close(summary?: RunSummary): void } {
  const total = run.config.episodes;
  const width = String(total).length;
  const timer = setInterval(() => {
    const p = run.progress();
    const oldest = p.pending[0];
    out.write(
      `… ${p.episodes_done}/${total} episodes, ${p.steps} steps, ${formatNumber(p.steps_per_second)} steps/s, ${p.pending.length} in flight` +
        (oldest ? `, oldest ${oldest.trace_id} ${oldest.tool} ${formatDuration(p.now - oldest.started_at)}` : '') +
        (run.headline?.() ? `; ${run.headline()}` : '') +
        '\n',
    );
  }, intervalMs);
  timer.unref();
  const returns = new EpisodeReturns();
  const off = run.events.onAny((e) => {
    returns.take(e);
    switch (e.type) {
      case 'run_started':
        out.write(`run ${e.run_id}: env ${e.config.env}, ${e.config.episodes} episodes × ≤${e.config.max_steps} steps, concurrency ${e.config.concurrency}${e.config.threads ? ` over ${e.config.threads} threads` : ''}, policy ${e.config.policy}, seed ${e.config.seed}\n`);
        if (e.url !== undefined) out.write(`rewards: POST ${e.url}/rewards (the token is in ${e.dir}/server.json)\n`);
        break;
      case 'workers':
        if (e.workers.length > 0) out.write(`workers: ${e.workers.length} alive (${e.workers.map((w) => `${w.id} ${w.running}/${w.concurrency}`).join(', ')})\n`);
        else err.write(`warning: ${warningOf(e) ?? ''}\n`);
        break;
      case 'run_resumed':
        out.write(`resumed: ${e.episodes_finished} episodes finished before, ${e.steps} steps committed, ${e.inflight} call(s) were in flight\n`);
        if (e.lost_steps > 0) err.write(`warning: ${warningOf(e) ?? ''}\n`);
        break;
      case 'episode_finished': {
        const done = run.progress().episodes_done;
        out.write(
          `[${String(done).padStart(width)}/${total}] episode ${e.episode}: ${e.steps} steps, reward ${returnText(returns.of(e.episode), (n) => formatNumber(n))}, ${formatDuration(e.duration_ms)} (${e.reason}${e.error ? `: ${oneLine(e.error.message)}` : ''})\n`,
        );
        returns.forget(e.episode);
        break;
      }
      default: {
        const w = warningOf(e);
        if (w !== undefined) err.write(`warning: ${w}\n`);
        break;
      }
    }
  });
  return {
    close(summary) {
      clearInterval(timer);
      off();
      if (summary) result.write(summaryLines(summary).join('\n') + '\n');
    },
  };
}

/** Shared with the live view: the warning an event deserves, if any. */
export function warningOf(e: RunEvent): string | undefined {
  switch (e.type) {
    case 'trace_settled':
      // Every failed step, whatever failed it: the tool, its contract, or a patch the state schema refused.
      if (e.status === 'failed' && e.error && e.error.code !== 'TOOL_CANCELLED') return `${e.trace_id} ${e.error.code}: ${oneLine(e.error.message)}${e.error.hint ? ` (${e.error.hint})` : ''}`;
      return undefined;
    case 'loop_blocked':
      return `tool '${e.tool}' blocked the event loop for ${formatDuration(e.blocked_ms)} (trace ${e.trace_id}); declare it "isolate": "worker"`;
    case 'loop_lag':
      return lagText(e.lag_ms, e.in_flight);
    case 'store_unavailable':
      return `the state store ${e.store} is unreachable: the run is paused and retries with backoff`;
    case 'store_recovered':
      return `the state store ${e.store} is back after ${formatDuration(e.down_ms)}: the run goes on`;
    case 'workers':
      return e.workers.length === 0 ? noWorkers(e.queue) : undefined;
    case 'notice':
      return e.message;
    case 'run_resumed':
      return e.lost_steps > 0 ? `${e.lost_steps} step(s) in the run folder were no longer in Redis (lost by a Redis restart); they are kept in trajectories.lost.jsonl and their episodes continue from what Redis kept` : undefined;
    case 'calls_abandoned':
      return `${e.calls.length} call${e.calls.length === 1 ? '' : 's'} did not stop when ${e.calls.length === 1 ? 'its' : 'their'} AbortSignal fired and ${e.calls.length === 1 ? 'is' : 'are'} still running: ${e.calls.slice(0, 5).map((c) => `${c.tool} (${c.trace_id})`).join(', ')}${e.calls.length > 5 ? ', …' : ''}; the tool should pass ctx.signal on`;
    default:
      return undefined;
  }
}

/** Shared with the live view: what a distributed run without live workers says. */
export function noWorkers(queue: string): string {
  return `no live workers on queue ${queue}: the episodes wait. Start some: agent worker --store <the same redis URL>${queue === RUN_DEFAULTS.queue ? '' : ` --queue ${queue}`}`;
}

/** Shared with the live view: what a `loop_lag` event says. */
export function lagText(lagMs: number, inFlight: readonly { trace_id: string; tool: string }[]): string {
  const tools = [...new Set(inFlight.map((c) => c.tool))];
  return `the event loop stalled for ${formatDuration(lagMs)}${tools.length > 0 ? ` while ${tools.slice(0, 4).join(', ')} ${tools.length === 1 ? 'was' : 'were'} in flight (a handler blocking after an await?)` : ''}`;
}

/** Reward per episode over the episodes that ran to an end, saying which were left out and that delayed values count. */
function rewardLine(s: RunSummary): string {
  const r = s.rewards.per_episode;
  const interrupted = s.episodes.by_reason['interrupted'] ?? 0;
  if (r.mean === null || r.min === null || r.max === null) return `reward per episode: none, no episode ran to its end${interrupted > 0 ? ` (${interrupted} interrupted: cut short, their rewards say nothing of the policy)` : ''}`;
  const notes = [
    ...(interrupted > 0 ? [`over the ${r.episodes} that ran to their end; ${interrupted} interrupted left out`] : []),
    // An episode's own line shows its reward when it ended; delayed values that came after count here.
    ...(Object.values(s.rewards.by_source).some((x) => x.sla) ? ['with the delayed rewards that arrived after each episode ended'] : []),
  ];
  return `reward per episode: mean ${formatNumber(r.mean)}, min ${formatNumber(r.min)}, max ${formatNumber(r.max)}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`;
}

export function summaryLines(s: RunSummary): string[] {
  const lines = [
    `${s.status === 'completed' ? 'done' : 'interrupted'}: ${s.episodes.requested === 0 ? s.episodes.finished : `${s.episodes.finished}/${s.episodes.requested}`} episodes, ${s.steps.total} steps (${s.steps.failed} failed) in ${formatDuration(s.duration_ms)}, ${formatNumber(s.steps.per_second)} steps/s`,
    rewardLine(s),
  ];
  for (const [name, r] of Object.entries(s.rewards.by_source)) {
    const sla = r.sla;
    const delayed = sla
      ? `, ${r.pending} pending, ${sla.fallback + sla.late} imputed, ${sla.late} late${sla.failed > 0 ? `, ${sla.failed} failed` : ''}${sla.latency_ms ? `; arrival p50 ${formatDuration(sla.latency_ms.p50)}, p95 ${formatDuration(sla.latency_ms.p95)}, p99 ${formatDuration(sla.latency_ms.p99)}` : ''}`
      : '';
    const cost = r.calls && 'cost_usd' in r.calls ? `; ${r.calls.calls} judge calls, ${r.calls.input_tokens + r.calls.output_tokens} tokens${r.calls.cost_usd !== null ? `, $${r.calls.cost_usd.toFixed(4)}` : ''}` : '';
    lines.push(`  ${name}: ${r.arrived} arrived${r.mean === null ? '' : ` (mean ${formatNumber(r.mean)})`}${delayed}${cost}`);
  }
  for (const [name, t] of Object.entries(s.tools)) {
    const errors = Object.entries(t.errors).map(([code, n]) => `${code}×${n}`).join(', ');
    lines.push(`  tool ${name}: ${t.calls} calls, ${t.failed} failed${errors ? ` (${errors})` : ''}, mean ${formatDuration(t.mean_ms)}`);
  }
  if (s.abandoned_calls) lines.push(`  ${s.abandoned_calls.length} call(s) did not stop when their AbortSignal fired and were left running`);
  if (s.records_lost) lines.push(`  ${s.records_lost.records} record(s) could not be written: ${s.records_lost.reason}`);
  const telemetry = s.telemetry;
  if (telemetry) {
    const t = telemetry.traces;
    lines.push(`  traces: ${t.exported} spans sent to ${t.endpoint}${t.dropped > 0 ? `; ${t.dropped} DROPPED (${t.error ?? 'the export queue was full or the run ended first'}): is the collector up?` : ''}`);
    const m = telemetry.metrics;
    if (m) lines.push(`  metrics: ${m.pushes - m.failed} of ${m.pushes} pushes taken by ${m.endpoint}${m.error !== undefined ? ` (last failure: ${m.error})` : ''}`);
  }
  return lines;
}

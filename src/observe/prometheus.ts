/**
 * Prometheus metrics of runs and workers, built from their event streams: nothing in the step path
 * knows about them, and nothing is counted unless a server that serves `GET /metrics` subscribed.
 * prom-client is loaded only then (`RunMetrics.create`).
 *
 * Every run metric carries `run_id` (a worker serves the episodes of several runs). Counts and
 * names only: never a state, a param or an observation. The catalogue, with what each answers, is
 * in the README's "Observability".
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import type * as PromClientModule from 'prom-client';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RunEvent } from '../events/run-events.js';
import { Tally, TallyHistogram } from './metric-tallies.js';

/** What `GET /metrics` answers. */
export interface MetricsPage {
  readonly contentType: string;
  readonly body: string;
}

/** An event stream to count from: a run's `events`, a worker's. */
export interface EventSource<E> {
  onAny(listener: (event: E) => void): () => void;
}

/** The worker events counted (RolloutWorker's). */
export interface WorkerMetricEvent {
  readonly type: string;
  readonly runId?: string;
}

const TOOL_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const REWARD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

type PromClient = typeof PromClientModule;

/** A run's Prometheus metrics (steps, tools, rewards, episodes, sessions), rendered for `/metrics`. */
export class RunMetrics implements Disposable {
  readonly #registry: Registry;
  readonly #loop: IntervalHistogram;
  // Updated at every step: counted by us, handed to prom-client when it collects (metric-tallies.ts).
  readonly #steps = new Tally();
  readonly #toolCalls = new Tally();
  readonly #toolDuration = new TallyHistogram('agent_tool_call_duration_seconds', 'Tool call duration, retries included.', TOOL_BUCKETS);
  readonly #inFlight = new Tally();
  readonly #toolRetries: Counter;
  readonly #rewards: Counter;
  readonly #rewardsPending: Gauge;
  readonly #rewardDelay: Histogram;
  readonly #episodes: Counter;
  readonly #stalls: Counter;
  readonly #stallSeconds: Counter;
  readonly #errors: Counter;
  readonly #storeUp: Gauge;
  readonly #storeOutages: Counter;
  readonly #worker: Counter;
  readonly #llmCalls: Counter;
  readonly #llmTokens: Counter;
  /** `trace\0source` of each delayed value still awaited: only those leave the pending gauge when they land. */
  readonly #pending = new Set<string>();
  readonly #subscriptions: (() => void)[] = [];
  readonly #prom: PromClient;

  private constructor(prom: PromClient) {
    this.#prom = prom;
    const registry = (this.#registry = new prom.Registry());
    const counter = (name: string, help: string, labelNames: string[]): Counter => new prom.Counter({ name, help, labelNames, registers: [registry] });
    const gauge = (name: string, help: string, labelNames: string[]): Gauge => new prom.Gauge({ name, help, labelNames, registers: [registry] });
    const [steps, toolCalls, inFlight] = [this.#steps, this.#toolCalls, this.#inFlight];
    new prom.Counter({ name: 'agent_steps_total', help: 'Steps settled, by status (resolved, failed).', labelNames: ['run_id', 'status'], registers: [registry], collect() { steps.incInto(this); } });
    new prom.Counter({ name: 'agent_tool_calls_total', help: 'Tool calls finished, by tool and outcome (ok, or the error code).', labelNames: ['run_id', 'tool', 'outcome'], registers: [registry], collect() { toolCalls.incInto(this); } });
    registry.registerMetric(this.#toolDuration.asMetric());
    this.#toolRetries = counter('agent_tool_retries_total', 'Attempts beyond the first, by tool.', ['run_id', 'tool']);
    new prom.Gauge({ name: 'agent_traces_in_flight', help: 'Calls dispatched and not yet settled.', labelNames: ['run_id'], registers: [registry], collect() { inFlight.setInto(this); } });
    this.#rewards = counter('agent_rewards_total', 'Delayed reward values, by source and how they ended (arrived, late, imputed, failed).', ['run_id', 'source', 'status']);
    this.#rewardsPending = gauge('agent_rewards_pending', 'Delayed reward values awaited, by source.', ['run_id', 'source']);
    this.#rewardDelay = new prom.Histogram({ name: 'agent_reward_delay_seconds', help: 'From the step to its delayed value, by source (late ones included).', labelNames: ['run_id', 'source'], buckets: REWARD_BUCKETS, registers: [registry] });
    this.#episodes = counter('agent_episodes_total', 'Episodes ended, by reason (done, max_steps, policy_stop, error, …).', ['run_id', 'reason']);
    this.#stalls = counter('agent_event_loop_stalls_total', 'Times the event loop was held up, by the tool whose synchronous code held it ("" when none explains it).', ['run_id', 'tool']);
    this.#stallSeconds = counter('agent_event_loop_stall_seconds_total', 'Time the event loop was held up, summed over the stalls.', ['run_id']);
    this.#errors = counter('agent_errors_total', 'Errors reported on the run, by code.', ['run_id', 'code']);
    this.#storeUp = gauge('agent_store_available', '1 while the state store answers, 0 while it is away (durable runs).', ['run_id']);
    this.#storeOutages = counter('agent_store_outages_total', 'Times the state store went away.', ['run_id']);
    this.#llmCalls = counter('agent_llm_calls_total', 'Model calls (an LLM policy, its simulated user, an LLM judge), by role, model and outcome (ok, error).', ['run_id', 'role', 'model', 'outcome']);
    this.#llmTokens = counter('agent_llm_tokens_total', 'Tokens of those calls, by role, model and type (input, output).', ['run_id', 'role', 'model', 'type']);
    this.#worker = counter('agent_worker_episodes_total', "A worker's episodes, by what happened: claimed, done, lease_lost (a fenced write: another owner took over), handed_back, given_up.", ['run_id', 'event']);
    // The process: how late the event loop runs (percentiles since the last scrape), memory, CPU.
    // Sampled every 50 ms, not 10: an idle server otherwise wakes 100 times a second for it, and a
    // stall worth reporting (tens of ms and up) overlaps a sample all the same.
    const loop = (this.#loop = monitorEventLoopDelay({ resolution: 50 }));
    loop.enable();
    new prom.Gauge({
      name: 'agent_event_loop_delay_seconds',
      help: 'Event loop delay since the previous scrape, by quantile.',
      labelNames: ['quantile'],
      registers: [registry],
      collect() {
        for (const q of [0.5, 0.99]) this.set({ quantile: String(q) }, loop.count > 0 ? loop.percentile(q * 100) / 1e9 : 0);
        this.set({ quantile: '1' }, loop.count > 0 ? loop.max / 1e9 : 0);
        loop.reset();
      },
    });
    new prom.Gauge({ name: 'process_resident_memory_bytes', help: 'Resident memory of the process.', registers: [registry], collect() { this.set(process.memoryUsage.rss()); } });
    new prom.Gauge({ name: 'process_cpu_seconds_total', help: 'User and system CPU time of the process.', registers: [registry], collect() { const c = process.cpuUsage(); this.set((c.user + c.system) / 1e6); } });
  }

  /** Loads prom-client (only servers that serve /metrics do). */
  static async create(): Promise<RunMetrics> {
    return new RunMetrics(await import('prom-client'));
  }

  /** Counts a run's events under its id; returns the unsubscribe. */
  observe(runId: string, events: EventSource<RunEvent>): () => void {
    this.#storeUp.set({ run_id: runId }, 1);
    return this.#subscribe(events.onAny((e) => this.#count(runId, e)));
  }

  /** Counts the events of many runs, each under its own id (a worker's: `worker.onRunEvent`). */
  observeRuns(subscribe: (listener: (runId: string, event: RunEvent) => void) => () => void): () => void {
    return this.#subscribe(subscribe((runId, e) => this.#count(runId, e)));
  }

  /** Counts a worker's claims, ends and fenced writes, by run. */
  observeWorker(events: EventSource<WorkerMetricEvent>): () => void {
    const counted = new Map([['claimed', 'claimed'], ['episode_done', 'done'], ['lease_lost', 'lease_lost'], ['handed_back', 'handed_back'], ['given_up', 'given_up']]);
    return this.#subscribe(
      events.onAny((e) => {
        const event = counted.get(e.type);
        if (event && e.runId !== undefined) this.#worker.inc({ run_id: e.runId, event });
      }),
    );
  }

  /** A gauge read when scraped (a server's sessions, a worker's running episodes). */
  gauge(name: string, help: string, read: () => number): void {
    new this.#prom.Gauge({ name, help, registers: [this.#registry], collect() { this.set(read()); } });
  }

  /** Every metric's current values (what an OTLP push sends). */
  json(): ReturnType<Registry['getMetricsAsJSON']> {
    return this.#registry.getMetricsAsJSON();
  }

  async render(): Promise<MetricsPage> {
    return { contentType: this.#registry.contentType, body: await this.#registry.metrics() };
  }

  /** Stops counting and stops the event loop monitor. */
  [Symbol.dispose](): void {
    for (const unsubscribe of this.#subscriptions.splice(0)) unsubscribe();
    this.#loop.disable();
    this.#registry.clear();
  }

  #subscribe(unsubscribe: () => void): () => void {
    this.#subscriptions.push(unsubscribe);
    return unsubscribe;
  }

  #count(run_id: string, e: RunEvent): void {
    switch (e.type) {
      case 'dispatched':
        return this.#inFlight.add(run_id, () => ({ run_id }));
      case 'trace_settled': {
        this.#inFlight.add(run_id, () => ({ run_id }), -1);
        this.#steps.add(`${run_id}\0${e.status}`, () => ({ run_id, status: e.status }));
        for (const source in e.rewards) if (e.rewards[source]?.status === 'pending') this.#await(run_id, e.trace_id, source);
        return;
      }
      case 'calls_abandoned':
        return this.#inFlight.add(run_id, () => ({ run_id }), -e.calls.length);
      case 'tool_finished': {
        const { tool } = e;
        const outcome = e.ok ? 'ok' : (e.error?.code ?? 'error');
        this.#toolCalls.add(`${run_id}\0${tool}\0${outcome}`, () => ({ run_id, tool, outcome }));
        this.#toolDuration.observe(`${run_id}\0${tool}`, () => ({ run_id, tool }), e.duration_ms / 1000);
        if (e.attempts > 1) this.#toolRetries.inc({ run_id, tool: e.tool }, e.attempts - 1);
        return;
      }
      case 'reward_expected':
        return this.#await(run_id, e.trace_id, e.source);
      case 'reward_arrived':
      case 'reward_late':
        // A tool's own value (key "tool") lands with its step: it was never awaited.
        if (e.key === 'tool') return;
        this.#rewardDelay.observe({ run_id, source: e.source }, e.delay_ms / 1000);
        return this.#landed(run_id, e.trace_id, e.source, e.type === 'reward_arrived' ? 'arrived' : 'late');
      case 'reward_imputed':
        return this.#landed(run_id, e.trace_id, e.source, 'imputed');
      case 'reward_failed':
        return this.#landed(run_id, e.trace_id, e.source, 'failed');
      case 'episode_finished':
        return this.#episodes.inc({ run_id, reason: e.reason });
      case 'llm_call': {
        const labels = { run_id, role: e.role, model: e.model };
        this.#llmCalls.inc({ ...labels, outcome: e.error === undefined ? 'ok' : 'error' });
        this.#llmTokens.inc({ ...labels, type: 'input' }, e.input_tokens);
        return this.#llmTokens.inc({ ...labels, type: 'output' }, e.output_tokens);
      }
      case 'loop_blocked':
        this.#stalls.inc({ run_id, tool: e.tool });
        return this.#stallSeconds.inc({ run_id }, e.blocked_ms / 1000);
      case 'loop_lag':
        this.#stalls.inc({ run_id, tool: '' });
        return this.#stallSeconds.inc({ run_id }, e.lag_ms / 1000);
      case 'error':
        return this.#errors.inc({ run_id, code: e.error.code });
      case 'store_unavailable':
        this.#storeOutages.inc({ run_id });
        return this.#storeUp.set({ run_id }, 0);
      case 'store_recovered':
        return this.#storeUp.set({ run_id }, 1);
      default:
        return;
    }
  }

  #await(run_id: string, trace: string, source: string): void {
    const key = `${trace}\0${source}`;
    if (this.#pending.has(key)) return;
    this.#pending.add(key);
    this.#rewardsPending.inc({ run_id, source });
  }

  #landed(run_id: string, trace: string, source: string, status: string): void {
    this.#rewards.inc({ run_id, source, status });
    if (this.#pending.delete(`${trace}\0${source}`)) this.#rewardsPending.dec({ run_id, source });
  }
}

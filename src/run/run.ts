/**
 * `agent run` as a library: runs N episodes of an env with a policy, C at a time, and writes a
 * run folder. Reporters subscribe to `run.events` and read `run.progress()`; nothing here prints.
 *
 * With a Redis store the run is durable: its journal (run/run-journal.ts) holds what a resume
 * needs, and `Run.prepare({ resume: runId, store })` continues it after its process died.
 *
 * @example
 * const run = await Run.prepare({ env: 'fixtures/weather', episodes: 20, concurrency: 8 });
 * run.events.on('episode_finished', (e) => console.log(e.episode, e.reward));
 * const summary = await run.execute(controller.signal);
 *
 * The host of a run: the env, its events and statistics, the run folder, the journal, the run
 * server and telemetry, the manifest and the summary. Which episodes run when is its scheduler's
 * (scheduler.ts: a pool, a server's sessions; distributed runs go through coordinator.ts), the
 * episode itself the EpisodeRunner's, the policy makePolicy's (policy-factory.ts). Still over 500
 * lines: recording an episode in memory or in a journal (commit order, close, replay, prior
 * state) lives here and is the next part to move out (durable.ts holds the Redis side).
 */
import { setMaxListeners } from 'node:events';
import path from 'node:path';
import { AgentEnv } from '../env/agent-env.js';
import type { EnvEvent, ErrorInfo } from '../events/env-events.js';
import { RunWriter, trajectoryRecord, type EpisodeRecord } from '../replay/run-writer.js';
import { isLoggedReward, rewardEvent, rewardRecord } from '../replay/reward-log.js';
import { openTrajectoryStep } from '../replay/run-rewards.js';
import { readLostSteps } from '../replay/lost-steps.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { Emitter } from '../shared/emitter.js';
import { linkedController } from '../shared/abort.js';
import { AgentError, isAgentError, UsageError } from '../shared/errors.js';
import { codesWhere } from '../shared/error-codes.js';
import type { JsonValue } from '../shared/json.js';
import { redactUrl } from '../state/redis-store.js';
import type { StateStore } from '../state/store.js';
import type { Policy } from './policy.js';
import { llmModel } from './llm-agent.js';
import { envPolicySetup, makePolicy, namedPolicy, type RunPolicy } from './policy-factory.js';
import type { RunConfig, RunEvent, SettledStepEvent } from '../events/run-events.js';
import type { EpisodeFinishedEvent, JournalContents, JournalRun, RunJournal } from './run-journal.js';
import { RunStats, type RunProgress } from './run-stats.js';
import { isComputed, type RewardBinding } from '../schema/definition.js';
import { RunServer } from '../server/run-server.js';
import { RunMetrics } from '../observe/prometheus.js';
import type { OtelConfig } from '../observe/otel-config.js';
import { RunTraceIds } from '../observe/trace-context.js';
import { DEFAULT_QUEUE, EpisodeQueue } from './episode-queue.js';
import { coordinate, retireDistributed, withWorkers } from './coordinator.js';
import { archiveAndDrop, closeDurable, durableHooks, isRedisUrl, newJournal, resumeJournal, runIdFor, stopRetrying, watchStore, DEFAULT_STORE_WAIT_MS, type Durable } from './durable.js';
import { buildSummary, withLoss, type RunSummary } from './run-summary.js';
import { initialStatesOf } from '../generate/initial-states.js';
import { breather, EpisodeRunner, STORE_FAILURES, type EpisodeDriver, type EpisodeHooks, type PriorSteps } from './episode-runner.js';
import { envFingerprint } from './env-fingerprint.js';
import { memoryOrGiven, positiveInt, serverOptions, type RunOptions, type ServerSettings } from './run-options.js';
import { PoolScheduler, type EpisodeLauncher, type Scheduler } from './scheduler.js';
import { RUN_DEFAULTS } from '../shared/defaults.js';
import { startTelemetry, webConsole, writeServerFile } from './run-attachments.js';

export type { RunOptions } from './run-options.js';

interface RunSetup {
  readonly runId: string;
  readonly env: AgentEnv;
  readonly ownedStore: StateStore | undefined;
  readonly durable: Durable | undefined;
  readonly policy: Policy;
  readonly config: RunConfig;
  readonly out: string;
  readonly clock: Clock;
  readonly initialStates: readonly JsonValue[];
  readonly server: ServerSettings | undefined;
  readonly storeWaitMs: number;
  readonly journalRun: JournalRun;
  readonly onEpisodeEnd: RunOptions['onEpisodeEnd'];
  /** Which episodes run when: a pool of N, C at a time, or a server's sessions. */
  readonly scheduler: Scheduler;
  readonly otel: { readonly config: OtelConfig; readonly ids: RunTraceIds } | undefined;
}

/** Runs episodes of an env with a policy into a run folder: prepare (options checked, env loaded), then execute. With a Redis store it is durable and resumable. */
export class Run implements AsyncDisposable {
  /** Names the run folder (`<out>/<run-id>/`) and, with a Redis store, the run's keys. */
  readonly runId: string;
  readonly events: Emitter<RunEvent>;
  readonly config: RunConfig;
  readonly #setup: RunSetup;
  readonly #env: AgentEnv;
  readonly #clock: Clock;
  readonly #stats: RunStats;
  readonly #durable: Durable | undefined;
  readonly #runner: EpisodeRunner;
  /** What this run records of each episode, and where (see EpisodeHooks). */
  readonly #hooks: EpisodeHooks;
  #dir: string | undefined;
  #writer: RunWriter | undefined;
  #server: RunServer | undefined;
  readonly #breathe = breather(() => this.#writer);
  /** Episodes that ran to an end (not interrupted): the per-episode reward statistics cover these. */
  readonly #counted = new Set<number>();
  /** A resumed run's committed steps, per episode, until the episode continues. */
  readonly #priorSteps = new Map<number, SettledStepEvent[]>();
  /** Stops the run from inside: a store failure. */
  readonly #internal = new AbortController();
  #failure: AgentError | undefined;
  /** An episode failed with an error that stops the run (the error table's `stopsRun`: an llm: policy's inference server down): no episode is started after it. */
  #stoppedBy: ErrorInfo | undefined;
  /** `execute`'s signal (the caller's and the internal one). */
  #signal: AbortSignal | undefined;

  private constructor(setup: RunSetup) {
    this.#setup = setup;
    this.runId = setup.runId;
    this.#env = setup.env;
    this.#durable = setup.durable;
    this.config = setup.config;
    this.#clock = setup.clock;
    this.#stats = new RunStats(() => setup.clock.now());
    this.events = new Emitter<RunEvent>();
    this.#runner = new EpisodeRunner({ env: setup.env, policy: setup.policy, clock: setup.clock, seed: setup.config.seed, maxSteps: setup.config.max_steps, initialStates: setup.initialStates, emit: (e) => this.events.emit(e), breathe: this.#breathe });
    const journal = setup.durable?.journal;
    this.#hooks = {
      ...(setup.durable ? durableHooks(setup.durable) : {}),
      prior: (i) => this.#priorOf(i),
      initialState: (id, state) => this.#writer?.writeState(id, state),
      settled: (step) => this.#forward(step),
      storeFailed: (err) => this.#fail(err),
      close: (record, finished) => this.#close(finished.instance_id, record, finished),
      ended: (i, state) => {
        this.#counted.add(i);
        this.#setup.onEpisodeEnd?.(i, state);
      },
    };
    this.events.onAny((e) => this.#stats.apply(e));
    this.events.on('episode_finished', (e) => {
      if (e.error && STOPS_RUN.has(e.error.code)) this.#stoppedBy ??= e.error;
    });
    if (journal) journal.onFailure = (err) => this.#fail(err);
  }

  /** Validate options, load the env and the policy (or the journal of a run to resume). Nothing is written yet; errors here are the user's (exit 2). */
  static async prepare(options: RunOptions): Promise<Run> {
    const clock = options.clock ?? systemClock;
    const storeWaitMs = options.storeWaitMs ?? DEFAULT_STORE_WAIT_MS;
    if (!(storeWaitMs >= 0)) throw new UsageError(`store wait must be ≥ 0 ms (got ${storeWaitMs})`);
    if (options.distributed && options.resume === undefined && !isRedisUrl(options.store)) throw new UsageError('a distributed run needs a Redis store', 'Pass --store redis://host:port/db, the Redis your workers use.');
    if (options.sessions && options.distributed) throw new UsageError('a served run runs its episodes here, as its clients open them', 'Serve without --distributed.');
    if (options.distributed && options.port !== undefined) throw new UsageError('a distributed run does not serve POST /rewards yet', 'Drop --port: delayed rewards of a distributed run come from module and judge sources, which its workers evaluate.');
    const server = options.port === undefined ? undefined : serverOptions(options.port, options.host, options.token);
    const durable = options.resume !== undefined ? await resumeJournal(options.resume, options.store, options.signal) : await newJournal(options.store, clock, options.seed ?? RUN_DEFAULTS.seed, path.resolve(options.out ?? RUN_DEFAULTS.out), options.signal);
    const saved = durable?.resumed?.run;
    let opened: AgentEnv | undefined;
    try {
      const queueName = saved ? saved.distributed?.queue : options.distributed ? (options.queue ?? DEFAULT_QUEUE) : undefined;
      const storeUrl = durable ? redactUrl(durable.url) : '<redis-url>';
      if (saved && (saved.config.policy === SERVED_POLICY) !== (options.sessions !== undefined)) {
        throw saved.config.policy === SERVED_POLICY
          ? new UsageError(`run ${saved.run_id} was served (agent serve): its episodes are driven by clients, not a policy`, `Serve it again: agent serve --resume ${saved.run_id} --store ${storeUrl} (episodes that were open end client_lost, with every step their clients were answered).`)
          : new UsageError(`run ${saved.run_id} was not served: its episodes are driven by its policy`, `Resume it with: agent run --resume ${saved.run_id} --store ${storeUrl}`);
      }
      if (saved && options.distributed && queueName === undefined) throw new UsageError(`run ${saved.run_id} did not run distributed`, 'Resume it without --distributed.');
      const episodes = options.sessions ? 0 : positiveInt('episodes', saved?.config.episodes ?? options.episodes, RUN_DEFAULTS.episodes);
      const concurrency = positiveInt('concurrency', saved?.config.concurrency ?? options.concurrency, RUN_DEFAULTS.concurrency);
      const maxSteps = positiveInt('max-steps', saved?.config.max_steps ?? options.maxSteps, RUN_DEFAULTS.maxSteps);
      const seed = saved?.config.seed ?? options.seed ?? RUN_DEFAULTS.seed;
      if (!Number.isInteger(seed)) throw new UsageError(`seed must be an integer (got ${seed})`);
      // A policy made by the caller (makePolicy), or what names one: a function, a module path, random, llm:<model>.
      const made = typeof options.policy === 'object' ? options.policy : undefined;
      const spec = typeof options.policy === 'object' ? made?.policy : options.policy;
      const policyName = options.sessions ? SERVED_POLICY : saved?.config.policy ?? made?.record.name ?? (typeof spec === 'function' ? spec.name || 'custom' : (spec ?? RUN_DEFAULTS.policy));
      if (saved && typeof spec !== 'function' && policyName === 'custom') {
        throw new UsageError(`run ${saved.run_id} was started with a policy function`, 'Resume it from code: Run.prepare({ resume, store, policy }) with the same function.');
      }
      if (queueName !== undefined && typeof spec === 'function') throw new UsageError('a distributed run cannot take a policy function: its workers load the policy themselves', 'Pass a policy module path (the same path on every worker machine).');
      if (saved?.config.llm) throw new UsageError(`run ${saved.run_id} was run by an llm: policy, whose conversations are not journaled: its episodes cannot be continued mid-conversation`, 'Start a new run; what the interrupted run completed is in its run folder.');
      if (queueName !== undefined && llmModel(policyName) !== undefined) throw new UsageError('a distributed run cannot take an llm: policy yet: its workers load the policy by path', 'Run it without --distributed (episodes run concurrently here, up to --concurrency), or wrap the model in a policy module.');
      const runId = durable?.journal.runId ?? runIdFor(clock.now(), seed);
      const out = saved?.out ?? path.resolve(options.out ?? RUN_DEFAULTS.out);
      const toolOptions = saved ? saved.tool_options : options.toolOptions;
      const rewardSources = saved ? saved.reward_sources : options.rewardSources;
      const owned = durable ? undefined : await memoryOrGiven(options.store);
      const stateStore = durable?.store ?? (typeof options.store === 'object' ? options.store : undefined);
      const otel = options.otel ? { config: options.otel, ids: new RunTraceIds(runId, options.otel.sampling) } : undefined;
      const env = await AgentEnv.open(saved?.env_dir ?? options.env, {
        seed,
        clock,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(toolOptions ? { toolOptions } : {}),
        ...(rewardSources ? { rewardSources } : {}),
        ...(options.blockThresholdMs !== undefined ? { blockThresholdMs: options.blockThresholdMs } : {}),
        // A run keeps one instance per episode; trim each history so long runs stay bounded.
        ...(stateStore ? { store: stateStore } : { storeOptions: { snapshotEvery: 50, retainDeltas: 1_000 } }),
        watchEventLoop: true,
        ...(otel ? { traceparent: (traceId: string) => otel.ids.traceparent(traceId) } : {}),
      });
      opened = env;
      const initialStates = options.initialStates ?? initialStatesOf(env.definition, seed);
      // Made once the env is open: an llm: agent is told the env's policy.md and asked its description (unless told otherwise).
      const runPolicy: RunPolicy =
        made ??
        (options.sessions
          ? namedPolicy(servedPolicy, SERVED_POLICY)
          : await makePolicy(typeof spec === 'function' ? spec : policyName, envPolicySetup(env.definition, options.llm, seed, options.signal)));
      const llmConfig = runPolicy.record.llm;
      const config: RunConfig = { env: env.definition.name, episodes, concurrency, max_steps: maxSteps, seed, policy: runPolicy.record.name, ...(llmConfig ? { llm: llmConfig } : {}), ...(otel ? { trace_sampling: otel.config.sampling.ratio } : {}) };
      const journalRun: JournalRun = saved ?? {
        run_id: runId,
        started_at: clock.now(),
        env_dir: env.definition.dir,
        out,
        config,
        ...(toolOptions ? { tool_options: toolOptions } : {}),
        ...(rewardSources ? { reward_sources: rewardSources } : {}),
        ...(queueName !== undefined ? { distributed: { queue: queueName }, env_fingerprint: await envFingerprint(env.definition.dir) } : {}),
        ...(options.served ? { served: options.served } : {}),
      };
      const withQueue = durable && queueName !== undefined ? { ...durable, queue: new EpisodeQueue(durable.redis, queueName) } : durable;
      const onEpisodeEnd: RunOptions['onEpisodeEnd'] = (i, state) => {
        runPolicy.ended(i);
        options.onEpisodeEnd?.(i, state);
      };
      const scheduler = options.sessions ?? new PoolScheduler(episodes, concurrency);
      return new Run({ runId, env, ownedStore: owned, durable: withQueue, policy: runPolicy.policy, config, out, clock, initialStates, server, storeWaitMs, journalRun, onEpisodeEnd, scheduler, otel });
    } catch (err) {
      await opened?.[Symbol.asyncDispose]();
      // A resume refused here gives the run back: another process (or this one, fixed) may take it at once.
      await durable?.journal.release();
      await closeDurable(durable);
      throw err;
    }
  }

  /** The local server's port, once `execute` has started it (with the `port` option). */
  get port(): number | undefined {
    return this.#server?.port;
  }

  /**
   * The local server's bearer token (from `prepare` on, for the caller to hand out) and base URL
   * (once `execute` has started it); both are in `<run>/server.json` while it serves.
   */
  get server(): { readonly token: string; readonly url: string | undefined } | undefined {
    const token = this.#setup.server?.token;
    return token === undefined ? undefined : { token, url: this.#server?.url };
  }

  /** The run folder, once `execute` has created it. */
  get dir(): string | undefined {
    return this.#dir;
  }

  get definition(): AgentEnv['definition'] {
    return this.#env.definition;
  }

  progress(): RunProgress {
    return { ...this.#stats.snapshot(), reward_flow: this.#env.rewards.ledger.counts() };
  }

  /** The env's rewards: `submit` delivers a delayed value while the run is live. */
  get rewards(): AgentEnv['rewards'] {
    return this.#env.rewards;
  }

  /** Run every episode. Aborting `signal` stops gracefully: calls in flight are cancelled and the folder is flushed, marked interrupted. */
  async execute(outer: AbortSignal = new AbortController().signal): Promise<RunSummary> {
    setMaxListeners(0, outer);
    using linked = linkedController(outer, this.#internal.signal);
    const signal = linked.signal;
    this.#signal = signal;
    setMaxListeners(0, signal);
    const durable = this.#durable;
    const local = durable?.journal;
    const queue = durable?.queue;
    const resumed = durable?.resumed;
    const started = this.#setup.journalRun.started_at;
    const runId = this.runId;
    const serving = this.#setup.server;
    const otel = this.#setup.otel;
    using metrics = serving === undefined && !otel?.config.metrics ? undefined : await RunMetrics.create();
    metrics?.observe(runId, this.events);
    await using telemetry = otel ? await startTelemetry(otel, this.config, metrics) : undefined;
    telemetry?.observe(this.events);
    // The web console at `/`, over the run's own folder as it is written (read every 50 ms: the page updates up to twenty times a second).
    await using consoleRoutes = serving === undefined ? undefined : await webConsole(() => this.#dir);
    await using server = serving === undefined ? undefined : await RunServer.start({ ...serving, runId, ...(consoleRoutes ? { mount: consoleRoutes } : {}), rewards: this.#env.rewards, events: this.events, progress: () => this.progress(), ...(metrics ? { metrics: () => metrics.render() } : {}), onClientDropped: (message) => this.events.emit({ type: 'notice', time: this.#clock.now(), code: 'CLIENT_DROPPED', message }), initialState: (id) => (/^initial-\d+$/.test(id) ? this.#initialStates[Number(id.slice('initial-'.length))] : undefined), ...(durable ? { durable: () => durable.journal.flushed() } : {}) });
    this.#server = server;
    const dir = path.join(this.#setup.out, runId);
    // Steps the folder showed that Redis no longer has: read before the folder is rewritten from the journal.
    const lost = resumed ? await readLostSteps(dir, resumed.steps) : 0;
    // A distributed run's folder is rewritten whole from the run's events stream, events.jsonl too.
    await using writer = resumed ? await RunWriter.reopen(this.#setup.out, runId, this.#manifest(started, resumed), { rewriteEvents: queue !== undefined }) : await RunWriter.create(this.#setup.out, runId, this.#manifest(started, undefined));
    this.#dir = writer.dir;
    this.#writer = writer;
    await using _serverFile = server ? await writeServerFile(writer.dir, server) : undefined;
    if (local && !resumed) {
      await local.create(this.#setup.journalRun, signal);
      await local.acquire(signal);
    }
    // With a journal, the folder shows a record only once Redis has acknowledged it: a crash never leaves the folder ahead of what a resume continues from.
    // (A step goes to the folder once its own journal write succeeded: see #forward.)
    // (A distributed run's events come from its stream, where they are committed already.)
    const toWriter = (e: RunEvent): void => {
      if (!durable || queue) writer.write(e);
      else if (e.type !== 'trace_settled') durable.journal.after(() => writer.write(e));
    };
    const unsubscribe = [this.events.onAny(toWriter), this.#env.events.onAny((e) => this.#forward(e))];
    const unwatch = durable ? watchStore(durable, { clock: this.#clock, waitMs: this.#setup.storeWaitMs, emit: (e) => this.events.emit(e), stopping: () => this.#failure !== undefined || this.#internal.signal.aborted, fail: (err) => this.#fail(err), resume: this.#resumeCommand }) : undefined;
    try {
      this.events.emit({ type: 'run_started', time: this.#clock.now(), started_at: started, run_id: runId, dir: writer.dir, config: this.config, ...(server ? { port: server.port, url: server.url } : {}) });
      if (resumed && !queue) {
        this.#replay(writer, resumed);
        // Episodes that finished just before the crash may still have their history in Redis.
        for (const [episode, entry] of resumed.episodes) if (entry.status === 'finished') await archiveAndDrop(durable, `ep-${episode}`, this.#historyDir);
        this.events.emit({ type: 'run_resumed', time: this.#clock.now(), run_id: runId, steps: resumed.steps.length, episodes_finished: [...resumed.episodes.values()].filter((e) => e.status === 'finished').length, inflight: resumed.inflight.size, lost_steps: lost });
      }
      if (queue && durable) {
        // The distributed coordinator: episodes run on workers, their events come back through Redis.
        await coordinate(
          {
            runId,
            episodes: this.config.episodes,
            env: { name: this.config.env, dir: this.#setup.journalRun.env_dir, fingerprint: this.#setup.journalRun.env_fingerprint },
            clock: this.#clock,
            durable,
            queue,
            writer,
            historyDir: this.#historyDir,
            initialState: (stateId) => this.#initialStates[Number(stateId.slice('initial-'.length))] ?? null,
            emit: (e) => this.events.emit(e),
            account: (e) => this.#account(e),
            counted: this.#counted,
            breathe: this.#breathe,
          },
          signal,
        );
      } else {
        const launcher: EpisodeLauncher = { episode: (index, s, driver) => this.#episode(index, s, driver), resumed: resumed?.episodes, stopped: () => this.#stoppedBy !== undefined };
        await this.#setup.scheduler.drive(launcher, signal);
      }
      // Judges and reward models still working on the last steps deliver before the folder closes.
      await this.#env.rewards.settle(signal);
      this.#env.rewards.expireDue();
      // A served run ends when its server is stopped: that is its normal end (only a crash leaves it to resume).
      const status = signal.aborted && (!this.#setup.scheduler.stopIsEnd || this.#failure) ? 'interrupted' : 'completed';
      // Closing the env cancels whatever is still in flight; those traces settle (as cancelled) into the logs.
      await this.#env[Symbol.asyncDispose]();
      const abandoned = this.#env.runningCalls();
      if (abandoned.length > 0) this.events.emit({ type: 'calls_abandoned', time: this.#clock.now(), calls: abandoned.map(({ tool, traceId }) => ({ tool, trace_id: traceId })) });
      this.events.emit({ type: 'run_finished', time: this.#clock.now(), run_id: runId, status });
      await durable?.journal.flushed().catch(() => undefined);
      const sent = await telemetry?.finish();
      const built = withLoss(await withWorkers(durable, this.#stats.workersSeen(), buildSummary({ ...(sent ? { telemetry: sent } : {}), runId, status, started, finished: this.#clock.now(), config: this.config, progress: this.#stats.snapshot(), env: this.#env, counted: this.#counted, abandoned, ...(this.#failure ? { failure: this.#failure, resume: this.#resumeCommand } : {}) })), writer.loss);
      const stop = this.#stoppedBy;
      const summary = stop === undefined ? built : { ...built, stopped_by: { code: stop.code, message: stop.message, ...(stop.hint ? { hint: stop.hint } : {}) }, problem: built.problem ?? `${stop.message}; the episodes in flight failed with it and no more were started (${built.episodes.finished} of ${built.episodes.requested} episodes ran; what completed is in the run folder)` };
      await writer.finish(summary);
      if (durable && local) await this.#closeJournal(durable, local, status);
      // A write that failed while flushing is known only now: the caller hears of it all the same.
      return withLoss(summary, writer.loss);
    } finally {
      unwatch?.();
      for (const off of unsubscribe) off();
      this.#writer = undefined;
      await this[Symbol.asyncDispose]();
    }
  }

  /** What continues this run after it stopped. */
  get #resumeCommand(): string {
    return `${this.#setup.scheduler.resumeCommand} --resume ${this.runId} --store ${this.#durable ? redactUrl(this.#durable.url) : '<redis-url>'}`;
  }

  /** Stop the run on a store failure (once): episodes end as interrupted, the folder is marked, the run can be resumed. */
  #fail(err: AgentError): void {
    if (this.#failure) return;
    this.#failure = err;
    this.#internal.abort(err);
    stopRetrying(this.#durable, err);
  }

  /** A completed run is retired (its episodes' keys and journal removed: the folder has it all); an interrupted one stays, resumable. */
  async #closeJournal(durable: Durable, journal: RunJournal, status: RunSummary['status']): Promise<void> {
    try {
      if (status === 'completed' && !this.#failure) {
        await Promise.all(Array.from({ length: this.config.episodes }, (_, i) => durable.store.drop(`ep-${i}`)));
        if (durable.queue) await retireDistributed(durable.redis, durable.queue, this.runId, this.config.episodes);
        await journal.retire();
      } else if (!this.#failure) await journal.setStatus('interrupted');
    } catch {
      // Redis went away as the run ended: the journal still says running, which a resume handles the same.
    }
    await journal.release();
  }

  /** A committed step or reward of a distributed run into the reward ledger (per-episode rewards with delayed sources). */
  #account(e: RunEvent): void {
    const ledger = this.#env.rewards.ledger;
    if (e.type === 'trace_settled') {
      if (ledger.hasDelayed) openTrajectoryStep(ledger, trajectoryRecord(this.runId, e), this.#sources);
    } else if (isLoggedReward(e)) ledger.replay(e);
  }

  get #sources(): Map<string, { binding: RewardBinding['kind']; weight: number }> {
    return new Map([...this.#env.definition.rewards.values()].map((r) => [r.name, { binding: r.binding.kind, weight: r.weight }]));
  }

  /**
   * A resumed run's past, from its journal: the folder's logs rewritten as committed, the
   * statistics and the reward ledger rebuilt (deadlines that passed meanwhile apply now).
   */
  #replay(writer: RunWriter, resumed: JournalContents): void {
    const sources = this.#sources;
    const ledger = this.#env.rewards.ledger;
    for (const step of resumed.steps) {
      writer.writeStep(step);
      this.#stats.apply({ type: 'tool_finished', time: step.time, instance_id: step.instance_id, trace_id: step.trace_id, tool: step.action, ok: step.status === 'resolved', duration_ms: step.duration_ms, attempts: 1 });
      this.#stats.apply(step);
      for (const [source, entry] of Object.entries(step.rewards)) {
        if (sources.get(source)?.binding !== 'tool' || typeof entry.value !== 'number') continue;
        this.#stats.apply({ type: 'reward_arrived', time: step.time, instance_id: step.instance_id, trace_id: step.trace_id, episode: step.episode, step: step.step, source, value: entry.value, key: 'tool', delay_ms: 0, reward: step.reward });
      }
      let list = this.#priorSteps.get(step.episode);
      if (!list) this.#priorSteps.set(step.episode, (list = []));
      list.push(step);
      if (ledger.hasDelayed) openTrajectoryStep(ledger, trajectoryRecord(this.runId, step), sources);
    }
    for (const record of resumed.rewards) {
      writer.writeRewardRecord(record);
      const event = rewardEvent(record);
      ledger.replay(event);
      this.#stats.apply({ ...event, instance_id: record.instance_id } as RunEvent);
    }
    for (const [episode, entry] of resumed.episodes) {
      if (entry.status !== 'finished') continue;
      if (entry.record) {
        const stateId = entry.record.initial_state_id;
        writer.writeState(stateId, this.#initialStates[Number(stateId.slice('initial-'.length))] ?? null);
        writer.writeEpisode(entry.record);
      }
      this.#stats.apply(entry.event);
      if (entry.event.reason !== 'interrupted') this.#counted.add(episode);
      this.#priorSteps.delete(episode);
    }
    this.#env.rewards.expireDue();
  }

  get #historyDir(): string {
    return path.join(this.#setup.out, this.runId, 'history');
  }

  get #initialStates(): readonly JsonValue[] {
    return this.#setup.initialStates;
  }

  /** Env events into the run's stream (and a durable run's journal); a settled step gets the actions its policy chose among. */
  #forward(e: EnvEvent | SettledStepEvent): void {
    const journal = this.#durable?.journal;
    if (e.type !== 'trace_settled') {
      if (journal && isLoggedReward(e)) journal.reward(rewardRecord(e)).catch(() => undefined);
      return this.events.emit(e);
    }
    // The run is stopping on a store failure: a step settling now was not committed. A durable run
    // that is being interrupted does not commit the calls it cancels either: they stay in flight,
    // for the resume to run again (idempotent tools) or settle as TOOL_LOST.
    if (this.#failure) return;
    if (journal && this.#signal?.aborted && e.error?.code === 'TOOL_CANCELLED') return;
    if (e.error && STORE_FAILURES.has(e.error.code)) {
      this.#fail(new AgentError(e.error.code as 'STORE_WRITES_LOST', e.error.message, e.error.hint ? { hint: e.error.hint } : {}));
      return;
    }
    const step = this.#runner.committed(e);
    if (journal) {
      // Serialised once, for the journal and then the run folder.
      const json = JSON.stringify(step);
      journal.step(step, json).then(
        () => this.#writer?.write(step, json),
        () => undefined,
      );
    }
    this.events.emit(step);
  }

  /** run.json: what `agent reward` and `agent export` need to work on the folder once this process is gone. */
  #manifest(started: number, resumed: JournalContents | undefined): object {
    const def = this.#env.definition;
    return {
      schema_version: 1,
      run_id: this.runId,
      env: def.name,
      env_dir: def.dir,
      started_at: new Date(started).toISOString(),
      pid: process.pid,
      ...(this.#server ? { port: this.#server.port } : {}),
      ...(this.#durable ? { store: redactUrl(this.#durable.url) } : {}),
      ...(resumed ? { resumed_at: new Date(this.#clock.now()).toISOString() } : {}),
      config: this.config,
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

  #episode(index: number, signal: AbortSignal, driver?: EpisodeDriver): Promise<EpisodeFinishedEvent> {
    return this.#runner.run(index, this.#hooks, signal, driver);
  }

  /**
   * An episode's end in the folder and the store. In memory, its history is dropped (it lives on in
   * the run folder; kept, it would grow the process by one state log per episode). A durable run
   * journals the end first, then archives the history into the folder and removes its Redis keys;
   * an interrupted episode keeps them, to continue on resume. True when the instance is archived
   * (its lifecycle's last state).
   */
  async #close(instanceId: string, record: EpisodeRecord | undefined, finished: EpisodeFinishedEvent): Promise<boolean> {
    const durable = this.#durable;
    if (!durable) {
      if (record) this.#writer?.writeEpisode(record);
      await this.#env.store.drop(instanceId);
      return true;
    }
    // An interrupted episode keeps its history to continue on resume; a served one ends with its server (its client is gone).
    if ((finished.reason === 'interrupted' && this.#setup.scheduler.continuesEpisodes) || this.#failure) {
      // After a store failure the journal takes no more writes: a record now would count steps the
      // folder never got. The episode is not over; a resume writes its record.
      if (record && !this.#failure) durable.journal.after(() => this.#writer?.writeEpisode(record));
      return false;
    }
    try {
      await durable.journal.episodeFinished(finished.episode, record, finished);
      if (record) this.#writer?.writeEpisode(record);
      await archiveAndDrop(durable, instanceId, this.#historyDir);
      return true;
    } catch (err) {
      // The journal's failure stops the run (see #fail); so does a history that cannot be archived
      // as it is (a hole). The episode continues on resume.
      if (isAgentError(err) && STORE_FAILURES.has(err.code)) this.#fail(err);
      return false;
    }
  }

  /** What the journal holds of an episode that was running when the run's process stopped. */
  #priorOf(index: number): PriorSteps | undefined {
    const resumed = this.#durable?.resumed;
    if (resumed?.episodes.get(index)?.status !== 'running') return undefined;
    const steps = this.#priorSteps.get(index) ?? [];
    this.#priorSteps.delete(index);
    return { steps, inflight: resumed.inflight.get(index) };
  }

  /** Release the env without running (after `execute`, it is released already). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#env[Symbol.asyncDispose]();
    await this.#setup.ownedStore?.[Symbol.asyncDispose]();
    await closeDurable(this.#durable);
  }

}

/** Errors after which a run starts no more episodes (the error table's `stopsRun`). */
const STOPS_RUN: ReadonlySet<string> = codesWhere('stopsRun');

/** The policy name a served run records: its clients chose the actions. */
const SERVED_POLICY = 'client';

/** A served run has no policy: its episodes are driven by their clients (this is never asked). */
const servedPolicy: Policy = () => null;

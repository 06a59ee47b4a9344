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
 * The host of a run: the env, its events and statistics, the run folder, the run server and
 * telemetry, the manifest and the summary. Which episodes run when is its scheduler's
 * (scheduler.ts: a pool, a server's sessions, coordinator.ts: workers), the episode itself the
 * EpisodeRunner's, the policy makePolicy's (policy-factory.ts), and where episodes are recorded
 * (in memory, or journaled first) its recorder's (run-recorder.ts).
 */
import { setMaxListeners } from 'node:events';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { AgentEnv } from '../env/agent-env.js';
import type { ErrorInfo } from '../events/env-events.js';
import { RunWriter, trajectoryRecord } from '../replay/run-writer.js';
import { isLoggedReward } from '../replay/reward-log.js';
import { openTrajectoryStep } from '../replay/run-rewards.js';
import { readLostSteps } from '../replay/lost-steps.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { Emitter } from '../shared/emitter.js';
import { linkedController } from '../shared/abort.js';
import { UsageError, type AgentError } from '../shared/errors.js';
import { codesWhere } from '../shared/error-codes.js';
import type { JsonValue } from '../shared/json.js';
import { redactUrl } from '../state/redis-store.js';
import type { StateStore } from '../state/store.js';
import type { Policy } from './policy.js';
import { envPolicySetup, makePolicy, namedPolicy, type RunPolicy } from './policy-factory.js';
import type { RunConfig, RunEvent } from '../events/run-events.js';
import type { JournalRun } from './run-journal.js';
import { RunStats, type RunProgress } from './run-stats.js';
import { RunServer } from '../server/run-server.js';
import { RunMetrics } from '../observe/prometheus.js';
import type { OtelConfig } from '../observe/otel-config.js';
import { RunTraceIds } from '../observe/trace-context.js';
import { DEFAULT_QUEUE, EpisodeQueue } from './episode-queue.js';
import { DistributedScheduler, withWorkers } from './coordinator.js';
import { closeDurable, newJournal, resumeJournal, runIdFor, DEFAULT_STORE_WAIT_MS, type Durable } from './durable.js';
import { journalRecorder, memoryRecorder, rewardSources, type RecorderHost, type RunRecorder } from './run-recorder.js';
import { buildSummary, runManifest, withLoss, type RunSummary } from './run-summary.js';
import { initialStatesOf } from '../generate/initial-states.js';
import { breather, EpisodeRunner, type EpisodeHooks } from './episode-runner.js';
import { envFingerprint } from './env-fingerprint.js';
import { memoryOrGiven, positiveInt, refuseConflicts, refuseMismatch, serverOptions, SERVED_POLICY, threadCount, type RunOptions, type ServerSettings } from './run-options.js';
import { PoolScheduler, type EpisodeLauncher, type EventText, type Scheduler } from './scheduler.js';
import { ThreadScheduler } from './thread-scheduler.js';
import { RUN_DEFAULTS } from '../shared/defaults.js';
import { startTelemetry, webConsole, writeServerFile } from './run-attachments.js';

export type { RunOptions } from './run-options.js';

interface RunSetup {
  readonly runId: string;
  readonly env: AgentEnv;
  readonly ownedStore: StateStore | undefined;
  readonly durable: Durable | undefined;
  readonly policy: RunPolicy;
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
  /** Where this run records its episodes: in memory, or through a durable run's journal. */
  readonly #recorder: RunRecorder;
  /**
   * The event committed elsewhere (a remote scheduler's, a rollout worker's) being emitted now, and
   * its folder lines when they came serialized: the folder takes it as it is. Emitting is
   * synchronous, so the run's folder listener meets it while this holds it.
   */
  #elsewhere: RunEvent | undefined;
  #elsewhereText: EventText | undefined;
  /** What this run records of each episode, and where (see EpisodeHooks). */
  readonly #hooks: EpisodeHooks;
  #dir: string | undefined;
  #writer: RunWriter | undefined;
  #server: RunServer | undefined;
  readonly #breathe = breather(() => this.#writer);
  /** Episodes that ran to an end (not interrupted): the per-episode reward statistics cover these. */
  readonly #counted = new Set<number>();
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
    this.#runner = new EpisodeRunner({ env: setup.env, policy: setup.policy.policy, clock: setup.clock, seed: setup.config.seed, maxSteps: setup.config.max_steps, initialStates: setup.initialStates, emit: (e) => this.events.emit(e), breathe: this.#breathe });
    const host: RecorderHost = {
      runId: setup.runId,
      env: setup.env,
      runner: this.#runner,
      stats: this.#stats,
      clock: setup.clock,
      episodes: setup.config.episodes,
      initialStates: setup.initialStates,
      historyDir: path.join(setup.out, setup.runId, 'history'),
      continuesEpisodes: setup.scheduler.continuesEpisodes,
      counted: this.#counted,
      emit: (e) => this.events.emit(e),
      writer: () => this.#writer,
      stopping: () => this.#signal?.aborted === true,
      fail: (err) => this.#fail(err),
      failure: () => this.#failure,
    };
    this.#recorder = setup.durable ? journalRecorder(host, setup.durable, { run: setup.journalRun, storeWaitMs: setup.storeWaitMs, remote: setup.scheduler.remote }) : memoryRecorder(host);
    this.#hooks = {
      ...this.#recorder.hooks,
      ended: (i, state) => {
        this.#counted.add(i);
        this.#setup.onEpisodeEnd?.(i, state);
      },
    };
    this.events.onAny((e) => this.#stats.apply(e));
    this.events.on('episode_finished', (e) => {
      if (e.error && STOPS_RUN.has(e.error.code)) this.#stoppedBy ??= e.error;
    });
  }

  /** Validate options, load the env and the policy (or the journal of a run to resume). Nothing is written yet; errors here are the user's (exit 2). */
  static async prepare(options: RunOptions): Promise<Run> {
    const clock = options.clock ?? systemClock;
    const storeWaitMs = options.storeWaitMs ?? DEFAULT_STORE_WAIT_MS;
    refuseConflicts(options, storeWaitMs);
    const server = options.port === undefined ? undefined : serverOptions(options.port, options.host, options.token);
    const durable = options.resume !== undefined ? await resumeJournal(options.resume, options.store, options.signal) : await newJournal(options.store, clock, options.seed ?? RUN_DEFAULTS.seed, path.resolve(options.out ?? RUN_DEFAULTS.out), options.signal);
    const saved = durable?.resumed?.run;
    let opened: AgentEnv | undefined;
    let built: RunPolicy | undefined;
    try {
      const queueName = saved ? saved.distributed?.queue : options.distributed ? (options.queue ?? DEFAULT_QUEUE) : undefined;
      // A policy made by the caller (makePolicy), or what names one: a function, a module path, random, llm:<model>.
      const made = typeof options.policy === 'object' ? options.policy : undefined;
      const spec = typeof options.policy === 'object' ? made?.policy : options.policy;
      const policyName = options.sessions ? SERVED_POLICY : saved?.config.policy ?? made?.record.name ?? (typeof spec === 'function' ? spec.name || 'custom' : (spec ?? RUN_DEFAULTS.policy));
      refuseMismatch(saved, { options, queueName, storeUrl: durable ? redactUrl(durable.url) : '<redis-url>', policyIsFunction: typeof spec === 'function', policyName });
      const episodes = options.sessions ? 0 : positiveInt('episodes', saved?.config.episodes ?? options.episodes, RUN_DEFAULTS.episodes);
      const concurrency = positiveInt('concurrency', saved?.config.concurrency ?? options.concurrency, RUN_DEFAULTS.concurrency);
      const maxSteps = positiveInt('max-steps', saved?.config.max_steps ?? options.maxSteps, RUN_DEFAULTS.maxSteps);
      const seed = saved?.config.seed ?? options.seed ?? RUN_DEFAULTS.seed;
      if (!Number.isInteger(seed)) throw new UsageError(`seed must be an integer (got ${seed})`);
      const threads = options.sessions ? 1 : threadCount(options, episodes, concurrency, availableParallelism());
      const runId = durable?.journal.runId ?? runIdFor(clock.now(), seed);
      const out = saved?.out ?? path.resolve(options.out ?? RUN_DEFAULTS.out);
      const toolOptions = saved ? saved.tool_options : options.toolOptions;
      const rewardSources = saved ? saved.reward_sources : options.rewardSources;
      // A resumed run isolates (or not) as it started.
      const sandboxMode = saved?.config.sandbox?.mode ?? options.sandbox;
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
        ...(sandboxMode ? { sandbox: sandboxMode } : {}),
        ...(otel ? { traceparent: (traceId: string) => otel.ids.traceparent(traceId) } : {}),
      });
      opened = env;
      const initialStates = options.initialStates ?? initialStatesOf(env.definition, seed);
      // Made once the env is open: an llm: agent is told the env's policy.md and asked its description (unless told otherwise).
      const runPolicy: RunPolicy = (built =
        made ??
        (options.sessions
          ? namedPolicy(servedPolicy, SERVED_POLICY)
          : await makePolicy(typeof spec === 'function' ? spec : policyName, envPolicySetup(env.definition, options.llm, seed, options.signal, options.program))));
      const llmConfig = runPolicy.record.llm;
      const config: RunConfig = { env: env.definition.name, episodes, concurrency, ...(threads > 1 ? { threads } : {}), max_steps: maxSteps, seed, policy: runPolicy.record.name, ...(llmConfig ? { llm: llmConfig } : {}), ...(otel ? { trace_sampling: otel.config.sampling.ratio } : {}), ...(env.sandbox ? { sandbox: env.sandbox } : {}) };
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
      const scheduler: Scheduler =
        options.sessions ??
        (withQueue?.queue
          ? new DistributedScheduler({ runId, episodes, env: { name: config.env, dir: journalRun.env_dir, fingerprint: journalRun.env_fingerprint }, clock, durable: withQueue, queue: withQueue.queue, historyDir: path.join(out, runId, 'history') })
          : threads > 1
            ? new ThreadScheduler(threads, episodes, concurrency, {
                runId,
                envDir: env.definition.dir,
                seed,
                maxSteps,
                policy: policyName,
                ...(options.llm ? { llm: options.llm } : {}),
                ...(toolOptions ? { toolOptions } : {}),
                ...(rewardSources ? { rewardSources } : {}),
                ...(options.blockThresholdMs !== undefined ? { blockThresholdMs: options.blockThresholdMs } : {}),
                ...(sandboxMode ? { sandbox: sandboxMode } : {}),
                initialStates,
                finalStates: options.onEpisodeEnd !== undefined,
              })
            : new PoolScheduler(episodes, concurrency, runPolicy.driver));
      return new Run({ runId, env, ownedStore: owned, durable: withQueue, policy: runPolicy, config, out, clock, initialStates, server, storeWaitMs, journalRun, onEpisodeEnd, scheduler, otel });
    } catch (err) {
      await built?.dispose?.();
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
    const resumed = durable?.resumed;
    const scheduler = this.#setup.scheduler;
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
    const manifest = runManifest({ runId, definition: this.#env.definition, started, config: this.config, ...(server ? { port: server.port } : {}), ...(durable ? { store: redactUrl(durable.url) } : {}), ...(resumed ? { resumedAt: this.#clock.now() } : {}) });
    // A remote scheduler's folder is rewritten whole from its episodes' events stream, events.jsonl too.
    await using writer = resumed ? await RunWriter.reopen(this.#setup.out, runId, manifest, { rewriteEvents: scheduler.remote }) : await RunWriter.create(this.#setup.out, runId, manifest);
    this.#dir = writer.dir;
    this.#writer = writer;
    await using _serverFile = server ? await writeServerFile(writer.dir, server) : undefined;
    const recorder = this.#recorder;
    const unwatch = await recorder.open(signal, this.#resumeCommand);
    const unsubscribe = [this.events.onAny((e) => (this.#elsewhere === e ? recorder.elsewhere(writer, e, this.#elsewhereText) : recorder.write(writer, e))), this.#env.events.onAny((e) => recorder.forward(e))];
    try {
      this.events.emit({ type: 'run_started', time: this.#clock.now(), started_at: started, run_id: runId, dir: writer.dir, config: this.config, ...(server ? { port: server.port, url: server.url } : {}) });
      await recorder.resume(writer, lost);
      await writer.rewritten();
      await scheduler.drive(this.#launcher(writer), signal);
      // Judges and reward models still working on the last steps deliver before the folder closes.
      await this.#env.rewards.settle(signal);
      this.#env.rewards.expireDue();
      // A served run ends when its server is stopped: that is its normal end (only a crash leaves it to resume).
      const status = signal.aborted && (!scheduler.stopIsEnd || this.#failure) ? 'interrupted' : 'completed';
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
      await recorder.close(status);
      // A write that failed while flushing is known only now: the caller hears of it all the same.
      return withLoss(summary, writer.loss);
    } finally {
      unwatch();
      for (const off of unsubscribe) off();
      this.#writer = undefined;
      await this[Symbol.asyncDispose]();
    }
  }

  /** What the scheduler drives episodes through: the runner, and for a remote scheduler the run's stream and folder. */
  #launcher(writer: RunWriter): EpisodeLauncher {
    const ledger = this.#env.rewards.ledger;
    const sources = rewardSources(this.#env);
    return {
      episode: (index, signal, driver) => this.#runner.run(index, this.#hooks, signal, driver),
      resumed: this.#durable?.resumed?.episodes,
      stopped: () => this.#stoppedBy !== undefined,
      committed: (e, text) => {
        // A committed step or reward into the reward ledger (per-episode rewards with delayed sources).
        if (e.type === 'trace_settled') {
          if (ledger.hasDelayed) openTrajectoryStep(ledger, trajectoryRecord(this.runId, e), sources);
        } else if (isLoggedReward(e)) ledger.replay(e);
        const outer = this.#elsewhere;
        const outerText = this.#elsewhereText;
        this.#elsewhere = e;
        this.#elsewhereText = text;
        try {
          this.events.emit(e);
        } finally {
          this.#elsewhere = outer;
          this.#elsewhereText = outerText;
        }
      },
      ended: (finished, record, finalState) => {
        this.#recorder.endedElsewhere(writer, finished, record);
        if (finished.reason === 'interrupted') return;
        this.#counted.add(finished.episode);
        if (finalState !== undefined) this.#setup.onEpisodeEnd?.(finished.episode, finalState);
      },
      breathe: this.#breathe,
    };
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
    this.#recorder.failed(err);
  }

  get #initialStates(): readonly JsonValue[] {
    return this.#setup.initialStates;
  }

  /** Release the env without running (after `execute`, it is released already). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#env[Symbol.asyncDispose]();
    await this.#setup.policy.dispose?.();
    await this.#setup.ownedStore?.[Symbol.asyncDispose]();
    await closeDurable(this.#durable);
  }

}

/** Errors after which a run starts no more episodes (the error table's `stopsRun`). */
const STOPS_RUN: ReadonlySet<string> = codesWhere('stopsRun');


/** A served run has no policy: its episodes are driven by their clients (this is never asked). */
const servedPolicy: Policy = () => null;

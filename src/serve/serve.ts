/**
 * `agent serve` as a library: an env (or a benchmark suite) as a service that Python trainers
 * drive live, over OpenEnv's protocol. Under the hood it is a {@link Run} whose episodes are opened
 * and driven by clients: the run folder, delayed rewards, `--store redis://`, `--port` events and
 * `agent debug` work on served episodes as on any run.
 *
 * @example
 * const controller = new AbortController();
 * const summary = await serveEnv({ env: 'fixtures/weather', port: 8000, onListening: (url) => console.log(url) }, controller.signal);
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { loadSuite, policyTask, type Suite } from '../eval/benchmark/suite.js';
import { agentSystemPrompt } from '../eval/benchmark/benchmark.js';
import { loadEnvDefinition } from '../env/load-env.js';
import { resolveEnvDir } from '../schema/shipped-envs.js';
import type { EnvDefinition } from '../schema/definition.js';
import { RunMetrics } from '../observe/prometheus.js';
import { Run, type RunOptions } from '../run/run.js';
import type { RunSummary } from '../run/run-summary.js';
import { readJournalRun } from '../run/durable.js';
import type { ServedFrom } from '../run/run-journal.js';
import { redactUrl } from '../state/redis-store.js';
import { isLoopback } from '../server/http-guard.js';
import { AgentError, UsageError } from '../shared/errors.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { initialStatesOf } from '../generate/initial-states.js';
import { ServedEpisode, type ServedTask } from './served-episode.js';
import { ToolLists } from './protocol.js';
import { SessionScheduler } from '../run/session-scheduler.js';
import { ServeServer } from './serve-server.js';
import type { RolloutHost } from './rollouts.js';
import { TaskCurriculum } from './task-curriculum.js';
import { TokenServers } from '../llm/token-chat.js';
import { envFingerprint } from '../run/env-fingerprint.js';
import type { RolloutRunMeta } from '../run/rollout-jobs.js';
import { RemoteRollouts, type WorkersOptions } from './remote-rollouts.js';
import { CURRICULUM_FILE } from '../replay/curriculum-file.js';
import { raceAbort } from '../shared/abort.js';
import { RUN_DEFAULTS, SERVE_DEFAULTS } from '../shared/defaults.js';

/** What `serveEnv` serves: the env or suite, port and host, sessions and step limits, timeouts, and the run's store. */
export interface ServeOptions extends Omit<RunOptions, 'policy' | 'concurrency' | 'episodes' | 'sessions' | 'served' | 'port' | 'distributed' | 'resume' | 'initialStates'> {
  /**
   * Serve a run again after its process stopped (killed, crashed, Redis lost), from its journal in
   * the Redis `store`: every step its clients were answered is kept, the episodes that were open
   * end `client_lost` (their clients are gone), and new sessions continue the run in its folder.
   * The env, split, seed and step limit come from the journal; `env` is ignored.
   */
  readonly resume?: string;
  /** Called once a resumed run has replayed its journal: what it kept. */
  readonly onResumed?: (info: { readonly steps: number; readonly episodesFinished: number; readonly lostSteps: number }) => void;
  /** The port to listen on (0: any free one). */
  readonly listen: number;
  /** Sessions at once, WebSocket and HTTP together (default 1,024). */
  readonly maxSessions?: number;
  /** Let a rollouts request name an agent program to run its episodes (`--allow-agent-programs`): it runs as this process's user. */
  readonly agentPrograms?: boolean;
  /**
   * The inference servers rollouts requests may use (`--llm-base-url`): a request names one as
   * `base_url`, or gets the first. No other is ever called (a client cannot point the server at a
   * host of its choosing); with none, rollouts are refused.
   */
  readonly inferenceUrls?: readonly string[];
  /** Finished episodes whose rewards a client can still read (`rewards`) once none is still to come (default 1,000; the live ones, and those with a delayed reward pending, always: it is pushed when it lands). */
  readonly keptEpisodes?: number;
  /** An HTTP session with no request for this long ends (default 5 minutes). */
  readonly httpIdleMs?: number;
  /** A WebSocket peer from which nothing came (no message, no pong to the server's pings) for this long is cut off, its episode `client_lost` (default 30 s). */
  readonly wsTimeoutMs?: number;
  /** A suite's split whose tasks `reset {task_id}` runs (default `test`); several as `train,test`. */
  readonly split?: string;
  /**
   * Run the rollouts' `llm:` episodes on `agent worker`s taking episodes from this Redis and queue
   * (`--workers`), not in this process: the groups are still assembled and sent here.
   */
  readonly workers?: WorkersOptions;
  /** Also start the run's own server (POST /rewards, GET /events) on this port. */
  readonly runPort?: number;
  /** Called once the server listens: its URL, and the run folder. */
  readonly onListening?: (info: { readonly url: string; readonly dir: string; readonly runId: string; readonly tasks: number }) => void;
}

/** A served suite's tasks and the distinct initial states they start from. */
interface Served {
  /** What the journal keeps to serve the same tasks on resume. */
  readonly from: ServedFrom;
  readonly dir: string;
  /** A suite's own folder (its policy.md), when it is one. */
  readonly suite?: Suite;
  readonly initialStates: readonly JsonValue[];
  readonly tasks: ReadonlyMap<string, { readonly task: ServedTask; readonly index: number }>;
}

/** Serve until `signal` aborts; resolves with the run's summary once every session has ended. */
export async function serveEnv(options: ServeOptions, signal: AbortSignal): Promise<RunSummary> {
  const maxSessions = options.maxSessions ?? SERVE_DEFAULTS.maxSessions;
  if (!Number.isInteger(maxSessions) || maxSessions < 1) throw new UsageError(`max sessions must be a whole number ≥ 1 (got ${maxSessions})`);
  const host = options.host ?? RUN_DEFAULTS.host;
  if (!isLoopback(host) && (options.token === undefined || options.token === '')) {
    throw new UsageError(`serving on ${host} needs a token: the server would answer anyone who can reach this machine`, 'Pass --token <secret> (or set AGENT_TOKEN) and give it to the clients; or keep the default host 127.0.0.1.');
  }
  if (options.workers && !/^rediss?:\/\//.test(options.workers.store)) throw new UsageError(`--workers '${options.workers.store}' is not a Redis URL`, 'Pass --workers redis://host:port/db, the Redis your agent workers take episodes from (their --store).');
  const saved = options.resume === undefined ? undefined : await readJournalRun(options.resume, options.store, signal);
  if (saved && !saved.served) throw new UsageError(`run ${saved.run_id} was not served (agent serve): its episodes are driven by its policy`, `Resume it with: agent run --resume ${saved.run_id} --store ${redactUrl(String(options.store))}`);
  const served = await loadServed(saved?.served?.spec ?? options.env, saved?.served?.split ?? options.split ?? SERVE_DEFAULTS.split, saved?.config.seed ?? options.seed ?? RUN_DEFAULTS.seed);
  if (options.workers && (!served.suite || served.tasks.size === 0)) throw new UsageError(`--workers runs rollouts on workers, and ${served.dir} has no tasks to roll out`, 'Serve a suite (an env with tasks/<split>.jsonl, e.g. fixtures/lookup), or drop --workers.');
  const sessions = new SessionScheduler();
  const run = await Run.prepare({
    ...options,
    env: served.dir,
    sessions,
    served: served.from,
    initialStates: served.initialStates,
    maxSteps: options.maxSteps ?? SERVE_DEFAULTS.maxSteps,
    ...(options.runPort !== undefined ? { port: options.runPort } : {}),
    signal,
  });
  let roundRobin = 0;
  const tools = new ToolLists();
  const opener = {
    open: (o: { readonly seed?: number; readonly episodeId: string; readonly taskId?: string }): ServedEpisode => {
      if (o.taskId !== undefined) {
        const entry = served.tasks.get(o.taskId);
        if (!entry) {
          throw new AgentError('PARAMS_INVALID', `reset /task_id: no task '${o.taskId}'${served.tasks.size === 0 ? ' (this env is not a suite: it has no tasks)' : ''}`, { hint: served.tasks.size === 0 ? 'Serve a suite (an env with tasks/<split>.jsonl, e.g. tau-bench/airline) to reset by task.' : `Task ids look like '${[...served.tasks.keys()][0] ?? ''}': GET /tasks lists them.` });
        }
        return new ServedEpisode(entry.index, { episodeId: o.episodeId, task: entry.task, tools });
      }
      const n = served.initialStates.length;
      const index = o.seed !== undefined ? ((o.seed % n) + n) % n : roundRobin++ % n;
      return new ServedEpisode(index, { episodeId: o.episodeId, tools });
    },
    start: (episode: ServedEpisode) => sessions.open(episode),
  };
  const serving = new AbortController();
  const stop = (): void => {
    sessions.close();
    serving.abort(signal.reason);
  };
  if (signal.aborted) stop();
  else signal.addEventListener('abort', stop, { once: true });
  // The curriculum lives in the run folder, read back on --resume: opened at the first request, once the run has its folder.
  const folder = new Promise<string>((resolve) => run.events.on('run_started', (e) => resolve(e.dir)));
  let curriculum: Promise<TaskCurriculum> | undefined;
  let workers: RemoteRollouts | undefined;
  let executed = false;
  try {
    if (options.workers) {
      const meta: RolloutRunMeta = {
        env: run.definition.name,
        env_dir: served.dir,
        env_fingerprint: await envFingerprint(served.dir),
        seed: run.config.seed,
        max_steps: run.config.max_steps,
        initial_states: served.initialStates,
        ...(options.toolOptions ? { tool_options: options.toolOptions } : {}),
        ...(options.rewardSources ? { reward_sources: options.rewardSources } : {}),
      };
      workers = await RemoteRollouts.open(run.runId, meta, options.workers, signal);
    }
    using metrics = await RunMetrics.create();
    metrics.observe(run.runId, run.events);
    await using server = await ServeServer.start({
      port: options.listen,
      host,
      token: options.token,
      maxSessions,
      httpIdleMs: options.httpIdleMs ?? SERVE_DEFAULTS.httpIdleMs,
      wsTimeoutMs: options.wsTimeoutMs ?? SERVE_DEFAULTS.wsTimeoutMs,
      ...(options.keptEpisodes !== undefined ? { keptEpisodes: options.keptEpisodes } : {}),
      runId: run.runId,
      opener,
      events: run.events,
      schema: schemaOf(run.definition),
      tasks: [...served.tasks.values()].map((t) => t.task),
      metrics: () => metrics.render(),
      ...(served.suite && served.tasks.size > 0
        ? {
            rollouts: {
              runId: run.runId,
              task: (id: string) => served.tasks.get(id),
              taskHint: [...served.tasks.keys()][0] ?? '',
              system: await agentSystemPrompt(served.suite),
              start: (driver) => sessions.start(driver),
              elsewhere: (episode) => sessions.elsewhere(episode),
              ...(workers ? { workers } : {}),
              events: run.events,
              ...(options.agentPrograms ? { agentPrograms: true } : {}),
              inferenceUrls: options.inferenceUrls ?? [],
              maxConcurrency: maxSessions,
              record: (e) => run.events.emit(e),
              tokenServers: new TokenServers(),
              curriculum: (s) => raceAbort((curriculum ??= folder.then((dir) => TaskCurriculum.open(path.join(dir, CURRICULUM_FILE)))), s),
            } satisfies RolloutHost,
          }
        : {}),
    });
    metrics.gauge('agent_serve_sessions', 'Sessions open on this server (WebSocket and HTTP).', () => server.sessions);
    run.events.on('run_started', (e) => options.onListening?.({ url: server.url, dir: e.dir, runId: run.runId, tasks: served.tasks.size }));
    run.events.on('run_resumed', (e) => options.onResumed?.({ steps: e.steps, episodesFinished: e.episodes_finished, lostSteps: e.lost_steps }));
    executed = true;
    return await run.execute(serving.signal);
  } finally {
    signal.removeEventListener('abort', stop);
    // Failed before serving (the workers' Redis, the port): the env it loaded is released here.
    if (!executed) await run[Symbol.asyncDispose]();
    sessions.close();
    await workers?.[Symbol.asyncDispose]();
    await (await curriculum?.catch(() => undefined))?.flush();
  }
}

/** An env folder, or a suite (its tasks by id, their initial states deduplicated). */
async function loadServed(spec: string, split: string, seed: number): Promise<Served> {
  const dir = resolveEnvDir(spec);
  const from = { spec: dir, split };
  const definition = await loadEnvDefinition(dir);
  const initialStates = initialStatesOf(definition, seed);
  // Several splits at once (`train,test`): a trainer's tasks and the held-out ones it evaluates on, from one server.
  const splits = split.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const present = splits.filter((s) => existsSync(path.join(dir, 'tasks', `${s}.jsonl`)));
  if (present.length === 0) return { from, dir, initialStates, tasks: new Map() };
  const missing = splits.filter((s) => !present.includes(s));
  if (missing.length > 0) throw new UsageError(`no split '${missing[0] ?? ''}' in ${dir} (tasks/${missing[0] ?? ''}.jsonl)`, `Its splits: ${present.join(', ')}.`);
  const suites = await Promise.all(present.map((s) => loadSuite(dir, s, initialStates[0] ?? null)));
  const suite = suites[0] as Suite;
  // Tasks that share their database share one initial state (one line of states.jsonl, not hundreds).
  const states: JsonValue[] = [];
  const indexOf = new Map<JsonValue, number>();
  const tasks = new Map<string, { task: ServedTask; index: number }>();
  for (const t of suites.flatMap((s) => s.tasks)) {
    let index = indexOf.get(t.initialState);
    if (index === undefined) indexOf.set(t.initialState, (index = states.push(t.initialState) - 1));
    tasks.set(t.id, { task: policyTask(t), index });
  }
  return { from, dir: suite.envDir, suite, initialStates: states, tasks };
}

/** GET /schema: an action is one of the env's actions with its parameters; the observation our envelope; the state the env's. */
function schemaOf(def: EnvDefinition): JsonObject {
  // The user's actions (an env with two sides) are sent with "actor": "user", which they require.
  const actions = [...def.actions.values()].map((a) => {
    const user = a.actor === 'user';
    return { type: 'object', required: user ? ['name', 'actor'] : ['name'], properties: { name: { const: a.name }, params: a.parameters as JsonValue, ...(user ? { actor: { const: 'user' } } : {}) }, ...(a.description ? { description: a.description } : {}) };
  });
  const twoSided = [...def.actions.values()].some((a) => a.actor === 'user');
  return {
    action: { oneOf: actions },
    observation: {
      type: 'object',
      properties: {
        observation: { description: "The tool's observation (null on reset and for a failed step)." },
        actions: { type: 'array', description: 'The actions enabled now, in OpenAI tool format.' },
        ...(twoSided ? { user_actions: { type: 'array', description: 'The user\'s actions enabled now (sent with "actor": "user"), in OpenAI tool format.' } } : {}),
        episode_id: { type: 'string' },
        trace_id: { type: ['string', 'null'] },
        step: { type: 'integer' },
        instruction: { type: 'string' },
        task_id: { type: 'string' },
        error: { type: 'object' },
      },
    },
    state: def.stateSchema as JsonValue,
  } as JsonObject;
}

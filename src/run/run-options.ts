/**
 * What `Run.prepare` takes, and the checks its options pass before anything is loaded or written
 * (the errors here are the user's: exit 2).
 */
import type { SandboxMode } from '../sandbox/sandbox.js';
import type { JsonValue } from '../shared/json.js';
import type { Clock } from '../shared/clock.js';
import { UsageError } from '../shared/errors.js';
import type { StateStore } from '../state/store.js';
import type { OtelConfig } from '../observe/otel-config.js';
import { isLoopback, newToken } from '../server/http-guard.js';
import type { SessionScheduler } from './session-scheduler.js';
import type { Policy } from './policy.js';
import type { RunPolicy } from './policy-factory.js';
import type { ProgramLimits } from './program-episode.js';
import type { LlmPolicySettings } from './llm-agent.js';
import type { JournalRun, ServedFrom } from './run-journal.js';
import { llmModel } from './llm-agent.js';
import { isRedisUrl } from './durable.js';

/** The run's local server: where it listens and the token its clients send. */
export interface ServerSettings {
  readonly port: number;
  readonly host: string;
  readonly token: string;
}

/** What `Run.prepare` takes: the env, episodes, concurrency, policy, seed, store, server, and whether to resume or distribute. */
export interface RunOptions {
  /** The env folder. */
  readonly env: string;
  readonly episodes?: number;
  readonly concurrency?: number;
  readonly maxSteps?: number;
  /** `random` (default), a policy module path, `llm:<model>` (see `llm`), a policy function, or one made by `makePolicy` (what run.json records of it included). */
  readonly policy?: string | Policy | RunPolicy;
  /**
   * An `llm:<model>` policy: where the model is served and how it is sampled (token mode with
   * `tokens`), its system prompt, and what the user asks (default: the env's description).
   */
  readonly llm?: LlmPolicySettings & { readonly system?: string; readonly instruction?: string };
  /** An agent program's (`cmd:`) limits per episode: wall time (`time_limit`), model calls (`max_turns`). */
  readonly program?: ProgramLimits;
  /** How the env's sandbox runs commands: `isolated` (default), or `unsafe-host` (no isolation; recorded in run.json) only when asked for by name. */
  readonly sandbox?: SandboxMode;
  readonly seed?: number;
  /** Parent folder of run folders (default `runs`). */
  readonly out?: string;
  readonly toolOptions?: Readonly<Record<string, JsonValue>>;
  /** Replace reward source bindings of the env (see `LoadEnvOptions.rewardSources`). */
  readonly rewardSources?: Readonly<Record<string, unknown>>;
  /**
   * Episode i starts from `initialStates[i % length]` (default: the env's initial states). The
   * same object given twice is one state in the run folder (a benchmark's tasks sharing a database).
   */
  readonly initialStates?: readonly JsonValue[];
  /** Called as each episode ends (not when interrupted), with its final state (a benchmark scores it then). */
  readonly onEpisodeEnd?: (episode: number, finalState: JsonValue) => void;
  readonly clock?: Clock;
  readonly blockThresholdMs?: number;
  /**
   * Where episode states live while they run: a StateStore, `'memory'` (the default) or a Redis
   * URL (`redis://host:port/db`, keys under `agent:<run-id>:`). With a Redis URL the run is
   * durable: it keeps a journal there and can be resumed after its process died.
   */
  readonly store?: StateStore | string;
  /**
   * Continue the run of this id (after a crash or an interruption) from its journal in the Redis
   * `store`: env, episodes, seed and the other settings come from the journal; `env` is ignored.
   */
  readonly resume?: string;
  /** How long a durable run waits for an unreachable Redis before it stops, resumable (default 60 s). */
  readonly storeWaitMs?: number;
  /** Start the run's local server (0: any free port): `POST /rewards` delivers delayed rewards while the run is live. */
  readonly port?: number;
  /** The server's address: `127.0.0.1` (default) or, with `token`, another (`0.0.0.0` for a cluster). */
  readonly host?: string;
  /** The server's bearer token (default: a fresh one, in `<run>/server.json`); required off loopback. */
  readonly token?: string;
  /**
   * Run the episodes on `agent worker` processes instead of here (needs a Redis `store`): this
   * process queues them, follows their progress and writes the run folder. With `resume`, a
   * distributed run is continued in the same way whether or not this is set.
   */
  readonly distributed?: boolean;
  /** The queue of a distributed run (`agent:queue` by default): workers started with the same `--queue` take its episodes. */
  readonly queue?: string;
  /**
   * Worker threads to spread the episodes over, each with its own copy of the env and the policy
   * (`concurrency` episodes in flight across them); this thread keeps the folder, the live view and
   * the summary. `auto` (the default): the machine's cores when there are at least
   * `THREAD_MIN_EPISODES` episodes per thread and the run is one threads can share (see
   * `threadsRefused`), else 1 (every episode in this thread).
   */
  readonly threads?: number | 'auto';
  /**
   * A served run (`agent serve`): its server pushes episodes in as clients open them (each driven
   * by its client, or by a rollout's own policy); the run goes on until `execute`'s signal aborts or
   * the scheduler is closed.
   */
  readonly sessions?: SessionScheduler;
  /** A served run's env or suite folder and split, journaled (with a Redis store) so that `agent serve --resume` serves the same tasks again. */
  readonly served?: ServedFrom;
  /**
   * Send the run's traces (and, when the endpoint takes them, its metrics) over OTLP (`otelConfig()`
   * reads OpenTelemetry's variables): a trace per episode, a span per step, tool and model call,
   * rewards on their steps; its tools get the W3C trace context. The SDK is loaded only then.
   */
  readonly otel?: OtelConfig;
  /** Aborts loading (prepare); `execute` takes its own signal. */
  readonly signal?: AbortSignal;
}


/** A count option: a whole number ≥ 1, named as its flag is. */
export function positiveInt(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 1) throw new UsageError(`${name} must be a whole number ≥ 1 (got ${String(value)})`, `Pass --${name} with a positive integer.`);
  return v;
}

/**
 * Episodes per thread below which `threads: 'auto'` keeps the run in one thread. A thread's start
 * (its own env, modules, compiled validators) costs about a second of a core, and with steps as
 * cheap as a 20 ms timer the run's own thread, which takes every event into the folder, caps the
 * gain at ~1.3× on two cores: a run of 2,000 such episodes breaks even (bench/threads.bench.ts).
 */
export const THREAD_MIN_EPISODES = 500;

/** Why a run cannot spread over threads (undefined: it can): each thread opens the env and the policy itself, from what can be sent to it. */
export function threadsRefused(options: RunOptions): string | undefined {
  if (options.sessions) return 'a served run';
  if (options.resume !== undefined || options.distributed || isRedisUrl(options.store)) return 'a durable run (a Redis --store) keeps one journal, written from one thread; spread its episodes over machines with --distributed and `agent worker`s';
  if (typeof options.store === 'object') return 'a state store given in code';
  if (typeof options.policy === 'function' || typeof options.policy === 'object') return 'a policy given in code (a thread loads its policy by name: a module path, random, llm:<model>)';
  if (typeof options.policy === 'string' && options.policy.startsWith('cmd:')) return 'an agent program (cmd:), which runs as processes of its own already';
  if (options.clock) return 'a clock given in code';
  if (options.port !== undefined) return "a run serving --port (delayed rewards posted to it go into this thread's reward ledger)";
  if (options.otel) return 'a traced run (--otel)';
  if (options.llm && Object.values(options.llm).some((v) => typeof v === 'function')) return 'llm settings with callbacks';
  return undefined;
}

/** How many threads the run's episodes spread over (1: this thread only); `refuseConflicts` has refused threads the run cannot share. */
export function threadCount(options: RunOptions, episodes: number, concurrency: number, cores: number): number {
  const asked = options.threads ?? 'auto';
  if (asked !== 'auto') return positiveInt('threads', asked, 1);
  return threadsRefused(options) ? 1 : Math.max(1, Math.min(cores, concurrency, Math.floor(episodes / THREAD_MIN_EPISODES)));
}

/** A store that is not Redis: the memory store (undefined: the env makes its own), or refuses an unknown spec. */
export async function memoryOrGiven(spec: RunOptions['store']): Promise<undefined> {
  if (spec === undefined || typeof spec === 'object' || spec === 'memory') return undefined;
  throw new UsageError(`unknown store '${spec}'`, 'Pass --store memory (the default) or a Redis URL such as redis://127.0.0.1:6379/0.');
}

/** The server settings of a run, checked before anything starts: off loopback only with a token. */
export function serverOptions(port: number, host = '127.0.0.1', token?: string): ServerSettings {
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new UsageError(`port must be a whole number from 0 to 65535 (got ${port})`, 'Pass --port 0 for any free port.');
  if (token !== undefined && token.length < 16) throw new UsageError('the server token is shorter than 16 characters', 'Pass --token (or AGENT_TOKEN) a long random secret, e.g. `openssl rand -hex 24`; or pass none for a fresh one.');
  if (!isLoopback(host) && token === undefined) {
    throw new UsageError(`serving on ${host} needs a token: the server would answer anyone who can reach this machine`, 'Pass --token <secret> (or set AGENT_TOKEN) and give it to the clients that post rewards; or keep the default host 127.0.0.1.');
  }
  return { port, host, token: token ?? newToken() };
}

/** The policy name a served run records: its clients chose the actions. */
export const SERVED_POLICY = 'client';

/** Options that cannot go together, refused before anything is opened. */
export function refuseConflicts(options: RunOptions, storeWaitMs: number): void {
  if (!(storeWaitMs >= 0)) throw new UsageError(`store wait must be ≥ 0 ms (got ${storeWaitMs})`);
  if (options.distributed && options.resume === undefined && !isRedisUrl(options.store)) throw new UsageError('a distributed run needs a Redis store', 'Pass --store redis://host:port/db, the Redis your workers use.');
  if (options.sessions && options.distributed) throw new UsageError('a served run runs its episodes here, as its clients open them', 'Serve without --distributed.');
  if (typeof options.threads === 'number' && options.threads > 1) {
    const refused = threadsRefused(options);
    if (refused) throw new UsageError(`--threads ${options.threads} is not for this run: ${refused}`, 'Run it with --threads 1 (or leave --threads out).');
  }
  if (options.distributed && options.port !== undefined) throw new UsageError('a distributed run does not serve POST /rewards yet', 'Drop --port: delayed rewards of a distributed run come from module and judge sources, which its workers evaluate.');
}

interface PolicyFacts {
  readonly options: RunOptions;
  /** The distributed run's queue, when it is one. */
  readonly queueName: string | undefined;
  /** The store, its password redacted (for the hints). */
  readonly storeUrl: string;
  readonly policyIsFunction: boolean;
  readonly policyName: string;
}

/** What the run's mode and policy must agree with: the journal of the run being resumed, and a distributed run's workers (they load the policy by path). */
export function refuseMismatch(saved: JournalRun | undefined, f: PolicyFacts): void {
  const { options, queueName, storeUrl } = f;
  if (saved && (saved.config.policy === SERVED_POLICY) !== (options.sessions !== undefined)) {
    throw saved.config.policy === SERVED_POLICY
      ? new UsageError(`run ${saved.run_id} was served (agent serve): its episodes are driven by clients, not a policy`, `Serve it again: agent serve --resume ${saved.run_id} --store ${storeUrl} (episodes that were open end client_lost, with every step their clients were answered).`)
      : new UsageError(`run ${saved.run_id} was not served: its episodes are driven by its policy`, `Resume it with: agent run --resume ${saved.run_id} --store ${storeUrl}`);
  }
  if (saved && options.distributed && queueName === undefined) throw new UsageError(`run ${saved.run_id} did not run distributed`, 'Resume it without --distributed.');
  if (saved && !f.policyIsFunction && f.policyName === 'custom') {
    throw new UsageError(`run ${saved.run_id} was started with a policy function`, 'Resume it from code: Run.prepare({ resume, store, policy }) with the same function.');
  }
  if (queueName !== undefined && f.policyIsFunction) throw new UsageError('a distributed run cannot take a policy function: its workers load the policy themselves', 'Pass a policy module path (the same path on every worker machine).');
  if (saved?.config.llm) throw new UsageError(`run ${saved.run_id} was run by an llm: policy, whose conversations are not journaled: its episodes cannot be continued mid-conversation`, 'Start a new run; what the interrupted run completed is in its run folder.');
  if (queueName !== undefined && llmModel(f.policyName) !== undefined) throw new UsageError('a distributed run cannot take an llm: policy yet: its workers load the policy by path', 'Run it without --distributed (episodes run concurrently here, up to --concurrency), or wrap the model in a policy module.');
}

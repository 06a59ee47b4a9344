/**
 * Rollouts as a service: a trainer asks `agent serve` for K episodes of each of some tasks, run in
 * the runtime by an `llm:` policy in token mode against the trainer's inference server, and gets
 * each task's group as soon as its K episodes are over and every reward they await has landed (or
 * been imputed at its deadline): the token records of `agent export --format tokens`, streamed.
 *
 * Weight versions: every turn is labelled with the weights it was generated with (the server's
 * own report, else the version the trainer last declared). A group whose oldest turn is more than
 * `max_staleness` versions behind the newest known when it completes is re-run (`stale: "rerun"`,
 * at most `SERVE_DEFAULTS.staleReruns` times) or dropped (`stale: "drop"`), counted in the summary; it is
 * never sent mixed in silently.
 *
 * The episodes are the run's like any other (run folder, events, debug views, export); a request
 * that is cancelled, or whose client goes away, ends its episodes `client_closed`.
 */
import { truncatedBy, type EpisodeDriver } from '../run/episode-runner.js';
import type { EpisodeFinishedEvent } from '../run/run-journal.js';
import type { RunEvent } from '../events/run-events.js';
import type { ErrorInfo } from '../events/env-events.js';
import { withTask, type Policy } from '../run/policy.js';
import { llmPolicy, programPolicy, type PolicySetup, type RunPolicy } from '../run/policy-factory.js';
import type { ProgramLimits } from '../run/program-episode.js';
import { episodeTokenRecords, type TokenRecord, type TurnOf } from '../replay/token-export.js';
import { AgentError } from '../shared/errors.js';
import { isPlainObject } from '../shared/json.js';
import { raceAbort } from '../shared/abort.js';
import { LLM_DEFAULTS, SERVE_DEFAULTS } from '../shared/defaults.js';
import type { ServedTask } from './served-episode.js';
import { cleanSum } from '../shared/float-sum.js';
import type { GenerationGate } from './generation-gate.js';

/** A rollout request, as the client sends it (`{"type": "rollouts", "data": {…}}`). */
export interface RolloutRequest {
  readonly taskIds: readonly string[];
  /** Episodes per task: the GRPO group size K. */
  readonly n: number;
  /** The inference server's OpenAI base URL (vLLM-compatible: /tokenize, /v1/completions with token ids). */
  readonly baseURL: string;
  readonly model: string;
  readonly sampling: { readonly temperature: number; readonly top_p: number; readonly max_tokens: number };
  readonly seed: number;
  readonly toolParser?: string;
  readonly maxContext?: number;
  readonly concurrency: number;
  /** The weights' version the trainer pushed last (turns the server does not label carry it). */
  readonly weightVersion?: number;
  readonly maxStaleness?: number;
  readonly stale: 'drop' | 'rerun';
  /** An agent program that runs each episode instead of the suite's `llm:` agent (its argv, joined as a shell command line), and its limits per episode. */
  readonly agent?: { readonly command: string; readonly limits: ProgramLimits };
  /** How long a finished episode's pending rewards are awaited before its group goes without them. */
  readonly rewardWaitMs: number;
}

/** A task's group: its K token records, the oldest weight version among their turns, and how far behind that was. */
export interface RolloutGroup {
  readonly task_id: string;
  readonly group_id: string;
  readonly records: readonly TokenRecord[];
  readonly weight_version: number | null;
  /** Versions between the oldest turn's and the newest known when the group completed (null: no versions known). */
  readonly staleness: number | null;
  /** 0, or how many times the group was re-run for staleness. */
  readonly reruns: number;
  /** Rewards still pending when the group's wait for them ran out (`reward_wait_s`): their records count them as 0. */
  readonly missing?: readonly { readonly episode: number; readonly trace_id: string; readonly source: string }[];
}

export interface RolloutSummary {
  readonly groups: number;
  readonly episodes: number;
  readonly dropped: number;
  readonly rerun: number;
  readonly max_staleness_seen: number | null;
  /** Groups not sent because an episode of theirs ended before its first model turn (nothing to train on), and the first few such episodes. */
  readonly failed: number;
  readonly failures: readonly RolloutFailure[];
}

/** An episode that ended before its first model turn, failing its group. */
export interface RolloutFailure {
  readonly task_id: string;
  readonly episode: number;
  readonly reason: string;
  readonly error?: ErrorInfo;
}

/** Failures kept in a summary: enough to see why, however many groups failed. */
const FAILURES_KEPT = 10;

/** What the rollouts need of the served run. */
export interface RolloutHost {
  readonly runId: string;
  /** A served suite's task by id, with the initial state it starts from. */
  task(id: string): { readonly task: ServedTask; readonly index: number } | undefined;
  /** Example task ids, for an error's hint. */
  readonly taskHint: string;
  /** The system prompt an `llm:` agent of this suite is told. */
  readonly system: string;
  /** Runs an episode in the run; rejects when the run will not start it (the server is stopping). */
  start(driver: EpisodeDriver): Promise<unknown>;
  readonly events: { onAny(listener: (e: RunEvent) => void): () => void };
  /** Whether a request may name an agent program to run (`agent serve --allow-agent-programs`): it runs as this server's user. */
  readonly agentPrograms?: boolean;
  /** The inference servers a request may use (`agent serve --llm-base-url`), fixed when the server starts. */
  readonly inferenceUrls: readonly string[];
  /** Episodes a request may run at once: the server's `--max-sessions`. */
  readonly maxConcurrency: number;
  /** Writes an event into the run (a stale group's episodes marked as not sent). */
  record(event: RunEvent): void;
}

/** A request's inference server: one of those the server was started with (the first when it names none), never one a client chooses. */
function inferenceServer(given: unknown, allowed: readonly string[], bad: (field: string, want: string, hint?: string) => never): string {
  const hint = 'Start agent serve with --llm-base-url <url> for each inference server its rollouts may use (a request then names one as base_url, or gets the first).';
  const first = allowed[0];
  if (first === undefined) return bad('base_url', 'cannot be served: this server was started with no inference server to call', hint);
  if (given === undefined || given === null) return first;
  const norm = (u: string): string => u.replace(/\/+$/, '');
  if (typeof given !== 'string' || given === '') return bad('base_url', 'must be a non-empty string (or left out for the first of the server\'s)');
  const found = allowed.find((u) => norm(u) === norm(given));
  return found ?? bad('base_url', `'${given}' is not an inference server this server may call (it may call ${allowed.map((u) => `'${u}'`).join(', ')})`, hint);
}

/** The request's fields, checked: a typed error naming the field (`/data/<field>`) otherwise. */
export function parseRolloutRequest(raw: unknown, host: RolloutHost): RolloutRequest {
  const bad = (field: string, want: string, hint?: string): never => {
    throw new AgentError('PARAMS_INVALID', `rollouts /data/${field} ${want}`, { hint: hint ?? 'Send {"type": "rollouts", "data": {"task_ids": [...], "n": 4, "base_url": "http://127.0.0.1:8000/v1", "model": "<served model>", "sampling": {"temperature": 1}}}.' });
  };
  if (!isPlainObject(raw)) return bad('', 'must be an object');
  const ids = raw['task_ids'];
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === 'string')) return bad('task_ids', 'must be a non-empty array of task ids');
  if (ids.length > SERVE_DEFAULTS.maxRolloutTasks) bad('task_ids', `has ${ids.length} tasks: at most ${SERVE_DEFAULTS.maxRolloutTasks} a request`, 'Ask for them in several requests.');
  ids.forEach((id, i) => {
    if (!host.task(id as string)) bad(`task_ids/${i}`, `names no task of this suite ('${String(id)}')`, `GET /tasks lists them (ids look like '${host.taskHint}').`);
  });
  const n = raw['n'];
  if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > SERVE_DEFAULTS.maxGroupSize) bad('n', `must be a whole number from 1 to ${SERVE_DEFAULTS.maxGroupSize} (got ${JSON.stringify(n)})`, 'n is the group size K: episodes per task.');
  if ((n as number) * ids.length > SERVE_DEFAULTS.maxRolloutEpisodes) bad('n', `× ${ids.length} tasks is ${(n as number) * ids.length} episodes: at most ${SERVE_DEFAULTS.maxRolloutEpisodes} a request`, 'Ask for fewer tasks at once.');
  const str = (field: string): string => {
    const v = raw[field];
    return typeof v === 'string' && v !== '' ? v : bad(field, 'must be a non-empty string');
  };
  const sampling = raw['sampling'] ?? {};
  if (!isPlainObject(sampling)) return bad('sampling', 'must be an object {temperature?, top_p?, max_tokens?}');
  const num = (o: Record<string, unknown>, field: string, pointer: string, fallback: number, ok: (v: number) => boolean, want: string): number => {
    const v = o[field];
    if (v === undefined || v === null) return fallback;
    return typeof v === 'number' && ok(v) ? v : bad(pointer, want);
  };
  const whole = (v: number): boolean => Number.isInteger(v);
  const opt = (field: string, ok: (v: number) => boolean, want: string): number | undefined => (raw[field] === undefined || raw[field] === null ? undefined : num(raw, field, field, 0, ok, want));
  const stale = raw['stale'] ?? 'rerun';
  if (stale !== 'drop' && stale !== 'rerun') bad('stale', `must be "drop" or "rerun" (got ${JSON.stringify(stale)})`);
  const toolParser = raw['tool_parser'];
  if (toolParser !== undefined && typeof toolParser !== 'string') bad('tool_parser', 'must be a string (hermes, llama3_json)');
  const maxContext = opt('max_context', (v) => whole(v) && v > 0, 'must be a whole number > 0');
  const weightVersion = opt('weight_version', (v) => whole(v) && v >= 0, 'must be a whole number ≥ 0');
  const maxStaleness = opt('max_staleness', (v) => whole(v) && v >= 0, 'must be a whole number ≥ 0');
  const agent = raw['agent'];
  if (agent !== undefined && !host.agentPrograms) bad('agent', 'names an agent program, which this server does not run', 'A program runs as the server\'s user: start agent serve with --allow-agent-programs to let its clients name one.');
  const argv = isPlainObject(agent) ? agent['command'] : undefined;
  if (agent !== undefined && !(Array.isArray(argv) && argv.length > 0 && argv.every((a) => typeof a === 'string' && a !== ''))) bad('agent/command', 'must be a non-empty array of strings (the program and its arguments)', 'Send "agent": {"command": ["python3", "my_agent.py"]}.');
  const limits: ProgramLimits = isPlainObject(agent)
    ? {
        ...(agent['max_turns'] !== undefined ? { maxTurns: num(agent, 'max_turns', 'agent/max_turns', 0, (v) => whole(v) && v >= 1, 'must be a whole number ≥ 1') } : {}),
        ...(agent['timeout_s'] !== undefined ? { timeoutMs: num(agent, 'timeout_s', 'agent/timeout_s', 0, (v) => v > 0, 'must be a number of seconds > 0') * 1000 } : {}),
      }
    : {};
  return {
    taskIds: ids as string[],
    n: n as number,
    baseURL: inferenceServer(raw['base_url'], host.inferenceUrls, bad),
    model: str('model'),
    sampling: {
      temperature: num(sampling, 'temperature', 'sampling/temperature', LLM_DEFAULTS.tokensTemperature, (v) => v >= 0, 'must be a number ≥ 0'),
      top_p: num(sampling, 'top_p', 'sampling/top_p', LLM_DEFAULTS.topP, (v) => v > 0 && v <= 1, 'must be a number in (0, 1]'),
      max_tokens: num(sampling, 'max_tokens', 'sampling/max_tokens', LLM_DEFAULTS.maxTokens, (v) => whole(v) && v >= 1, 'must be a whole number ≥ 1'),
    },
    seed: num(raw, 'seed', 'seed', 0, whole, 'must be a whole number'),
    ...(typeof toolParser === 'string' ? { toolParser } : {}),
    ...(maxContext !== undefined ? { maxContext } : {}),
    concurrency: num(raw, 'concurrency', 'concurrency', Math.min(SERVE_DEFAULTS.rolloutConcurrency, host.maxConcurrency), (v) => whole(v) && v >= 1 && v <= host.maxConcurrency, `must be a whole number from 1 to ${host.maxConcurrency} (the server's --max-sessions)`),
    ...(weightVersion !== undefined ? { weightVersion } : {}),
    ...(maxStaleness !== undefined ? { maxStaleness } : {}),
    stale: stale as 'drop' | 'rerun',
    rewardWaitMs: num(raw, 'reward_wait_s', 'reward_wait_s', SERVE_DEFAULTS.rewardWaitMs / 1000, (v) => v > 0 && v <= 86_400, 'must be a number of seconds in (0, 86400]') * 1000,
    ...(Array.isArray(argv) ? { agent: { command: (argv as string[]).map(shellQuote).join(' '), limits } } : {}),
  };
}

/** An argument as `sh` reads it back unchanged. */
function shellQuote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The weights' versions a client has declared, shared by its requests: never goes back. */
export class WeightVersions {
  #current: number | undefined;

  get current(): number | undefined {
    return this.#current;
  }

  /** The trainer pushed `version`; an older one than the current is refused (nothing changes). */
  declare(version: unknown, pointer: string): void {
    if (!Number.isInteger(version) || (version as number) < 0) throw new AgentError('PARAMS_INVALID', `${pointer} must be a whole number ≥ 0 (got ${JSON.stringify(version)})`, { hint: 'Send the version the trainer just pushed to the inference server.' });
    const v = version as number;
    if (this.#current !== undefined && v < this.#current) {
      throw new AgentError('PARAMS_INVALID', `${pointer} ${v} is older than the current weight version ${this.#current}`, { hint: 'Versions only go forward: declare each new version once its weights are on the inference server.' });
    }
    this.#current = v;
  }

  /** A version the inference server reported: the newest known moves with it. */
  saw(version: number): void {
    if (this.#current === undefined || version > this.#current) this.#current = version;
  }
}

/**
 * One episode of a group, as its events arrive; `complete` resolves once it is over and no reward
 * it awaits is pending, or once it has waited `waitMs` for them (`missing` says which never came).
 */
class EpisodeCollector {
  readonly turns: TurnOf[] = [];
  readonly steps = new Map<number, number>();
  /** Delayed rewards awaited: `<trace>|<source>`. */
  readonly #pending = new Set<string>();
  finished: EpisodeFinishedEvent | undefined;
  readonly complete: Promise<void>;
  readonly #waitMs: number;
  #timer: NodeJS.Timeout | undefined;
  #resolve!: () => void;
  #reject!: (err: unknown) => void;

  constructor(waitMs: number) {
    this.#waitMs = waitMs;
    this.complete = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.complete.catch(() => undefined);
  }

  /** The run will never start it (the server is stopping). */
  fail(err: unknown): void {
    this.dispose();
    this.#reject(err);
  }

  end(finished: EpisodeFinishedEvent): void {
    this.finished = finished;
    // A source past its deadline with no fallback, or one that never answers, must not hold the group for ever.
    if (this.#pending.size > 0) this.#timer = setTimeout(() => this.#resolve(), this.#waitMs);
    this.#check();
  }

  /** The rewards still pending: after `complete`, those its wait gave up on. */
  missing(): { trace_id: string; source: string }[] {
    return [...this.#pending].map((k) => {
      const at = k.lastIndexOf('|');
      return { trace_id: k.slice(0, at), source: k.slice(at + 1) };
    });
  }

  dispose(): void {
    clearTimeout(this.#timer);
  }

  take(e: RunEvent): void {
    switch (e.type) {
      case 'llm_call':
        if (e.role === 'policy' && e.tokens) this.turns.push({ step: e.step ?? 1, tokens: e.tokens });
        break;
      case 'trace_settled':
        this.steps.set(e.step, e.status === 'resolved' ? e.reward : 0);
        for (const [source, entry] of Object.entries(e.rewards)) if (entry.status === 'pending') this.#pending.add(`${e.trace_id}|${source}`);
        break;
      case 'reward_expected':
        this.#pending.add(`${e.trace_id}|${e.source}`);
        break;
      // A value past its source's deadline (late) still lands in the run's reward log: the group counts it as export does.
      case 'reward_arrived':
      case 'reward_imputed':
      case 'reward_late':
        this.#pending.delete(`${e.trace_id}|${e.source}`);
        if (this.steps.has(e.step)) this.steps.set(e.step, e.reward);
        this.#check();
        break;
      case 'reward_failed':
        this.#pending.delete(`${e.trace_id}|${e.source}`);
        this.#check();
        break;
      default:
        break;
    }
  }

  #check(): void {
    if (!this.finished || this.#pending.size > 0) return;
    this.dispose();
    this.#resolve();
  }
}

/**
 * An episode of a rollout: the request's agent on a task's initial state — its `llm:` policy in the
 * run's loop, or its program driving the episode — ending `client_closed` when the request is cancelled.
 */
class RolloutEpisode implements EpisodeDriver {
  readonly drive?: EpisodeDriver['drive'];

  constructor(
    readonly initialIndex: number,
    readonly policy: Policy,
    program: EpisodeDriver | undefined,
    readonly signal: AbortSignal,
    readonly begin: (episode: number) => void,
    readonly over: (finished: EpisodeFinishedEvent) => void,
  ) {
    const drive = program?.drive?.bind(program);
    if (drive) {
      this.drive = async (control, runSignal) => {
        const end = await drive(control, AbortSignal.any([runSignal, signal]));
        return signal.aborted && !runSignal.aborted ? { ...end, reason: 'client_closed' } : end;
      };
    }
  }
}

/** At most `size` holders at once, served in the order they asked. */
class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  async acquire(signal: AbortSignal): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await raceAbort(new Promise<void>((resolve) => this.#waiting.push(resolve)), signal);
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#free++;
  }
}

/**
 * Runs a request's groups, `concurrency` episodes at a time, task by task; `onGroup` gets each
 * group as it completes. Resolves with the counts once every group is sent or dropped; rejects
 * with the reason when `signal` aborts (its episodes end `client_closed`). The request's
 * `weight_version` is declared by the caller, before it answers the request accepted.
 */
export async function runRollouts(request: RolloutRequest, host: RolloutHost, versions: WeightVersions, onGroup: (group: RolloutGroup) => void, signal: AbortSignal, gate?: GenerationGate): Promise<RolloutSummary> {
  const setup: PolicySetup = {
    system: () => Promise.resolve(host.system),
    seed: request.seed,
    llm: {
      baseURL: request.baseURL,
      tokens: true,
      temperature: request.sampling.temperature,
      topP: request.sampling.top_p,
      maxTokens: request.sampling.max_tokens,
      ...(request.toolParser !== undefined ? { toolParser: request.toolParser } : {}),
      ...(request.maxContext !== undefined ? { maxContext: request.maxContext } : {}),
      weightVersion: () => versions.current,
      ...(gate ? { beforeGenerate: (s?: AbortSignal) => gate.pass(s) } : {}),
    },
    signal,
  };
  const agent = request.agent ? await programPolicy(request.agent.command, { ...setup, program: request.agent.limits }) : await llmPolicy(request.model, `llm:${request.model}`, setup);
  try {
    return await rollGroups(request, host, versions, agent, onGroup, signal);
  } finally {
    await agent.dispose?.();
  }
}

async function rollGroups(request: RolloutRequest, host: RolloutHost, versions: WeightVersions, agent: RunPolicy, onGroup: (group: RolloutGroup) => void, requestSignal: AbortSignal): Promise<RolloutSummary> {
  const collectors = new Map<number, EpisodeCollector>();
  const unsubscribe = host.events.onAny((e) => {
    if (!('episode' in e) || typeof e.episode !== 'number') return;
    // Only this request's episodes: another client's run on other weights (its own versions).
    const c = collectors.get(e.episode);
    if (!c) return;
    c.take(e);
    if (e.type === 'llm_call' && e.tokens?.weight_version !== undefined) versions.saw(e.tokens.weight_version);
  });
  const slots = new Slots(request.concurrency);
  const counts = { groups: 0, episodes: 0, dropped: 0, rerun: 0, max_staleness_seen: null as number | null, failed: 0, failures: [] as RolloutFailure[] };
  // One group's error ends the request: its siblings stop with one abort, and none is sent after it.
  const stop = new AbortController();
  const signal = AbortSignal.any([requestSignal, stop.signal]);

  /** One episode of `task`, once a slot is free: its index and what it recorded, once complete. */
  const episode = async (task: { readonly task: ServedTask; readonly index: number }): Promise<{ readonly index: number; readonly c: EpisodeCollector }> => {
    await slots.acquire(signal);
    try {
      counts.episodes++;
      const c = new EpisodeCollector(request.rewardWaitMs);
      let index = -1;
      const policy = withTask(agent.policy, () => task.task);
      host
        .start(
          new RolloutEpisode(
            task.index,
            policy,
            agent.driver?.(task.index, task.task),
            signal,
            (i) => {
              index = i;
              collectors.set(i, c);
            },
            (finished) => {
              agent.ended(finished.episode);
              c.end(finished);
            },
          ),
        )
        .catch((err: unknown) => c.fail(err));
      try {
        await raceAbort(c.complete, signal);
      } finally {
        c.dispose();
        collectors.delete(index);
      }
      return { index, c };
    } finally {
      slots.release();
    }
  };

  const group = async (taskId: string): Promise<void> => {
    const task = host.task(taskId) as { readonly task: ServedTask; readonly index: number };
    for (let reruns = 0; ; reruns++) {
      const members = await Promise.all(Array.from({ length: request.n }, () => episode(task)));
      const groupId = `${taskId}/${members[0]?.index ?? 0}`;
      const turnless = members.filter(({ c }) => c.turns.length === 0);
      if (turnless.length > 0) {
        counts.failed++;
        for (const { index, c } of turnless.slice(0, FAILURES_KEPT - counts.failures.length)) {
          counts.failures.push({ task_id: taskId, episode: index, reason: c.finished?.reason ?? 'interrupted', ...(c.finished?.error ? { error: c.finished.error } : {}) });
        }
        return;
      }
      const records = members.flatMap(({ index, c }, trial) => {
        const finished = c.finished as EpisodeFinishedEvent;
        const terminated = !truncatedBy(finished.reason);
        return episodeTokenRecords({
          runId: host.runId,
          episode: index,
          taskId,
          trial,
          turns: c.turns,
          steps: [...c.steps].map(([step, reward]) => ({ step, reward })),
          reward: cleanSum([...c.steps.values()].reduce((a, b) => a + b, 0)),
          end: { terminated, truncated: !terminated, reason: finished.reason },
          sampling: { ...request.sampling, seed: request.seed },
          where: `episode ${index} of run ${host.runId}`,
        }).map((r) => ({ ...r, group_id: groupId }));
      });
      const turnVersions = records.flatMap((r) => r.turns.flatMap((t) => (t.weight_version !== undefined ? [t.weight_version] : [])));
      const oldest = turnVersions.length > 0 ? Math.min(...turnVersions) : null;
      const newest = versions.current;
      const staleness = oldest !== null && newest !== undefined ? newest - oldest : null;
      if (staleness !== null) counts.max_staleness_seen = Math.max(counts.max_staleness_seen ?? 0, staleness);
      if (request.maxStaleness !== undefined && staleness !== null && staleness > request.maxStaleness) {
        const rerun = request.stale === 'rerun' && reruns < SERVE_DEFAULTS.staleReruns;
        // The episodes stay in the run folder; this says they were not sent, so an export of the run can tell.
        host.record({ type: 'rollout_discarded', time: Date.now(), task_id: taskId, group_id: groupId, episodes: members.map((m) => m.index), reason: 'stale', staleness, then: rerun ? 'rerun' : 'drop' });
        if (rerun) {
          counts.rerun++;
          continue;
        }
        counts.dropped++;
        return;
      }
      signal.throwIfAborted();
      counts.groups++;
      const missing = members.flatMap(({ index, c }) => c.missing().map((m) => ({ episode: index, ...m })));
      onGroup({ task_id: taskId, group_id: groupId, records, weight_version: oldest, staleness, reruns, ...(missing.length > 0 ? { missing } : {}) });
      return;
    }
  };

  try {
    await Promise.all(
      request.taskIds.map((id) =>
        group(id).catch((err: unknown) => {
          if (!stop.signal.aborted) stop.abort(err);
          throw err;
        }),
      ),
    );
    return counts;
  } finally {
    unsubscribe();
  }
}

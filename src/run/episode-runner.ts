/**
 * One episode of an env with a policy: the instance reset (or restored from its committed steps),
 * then choose → dispatch → resolve until the env says done, no action is enabled, the policy stops
 * or the step limit is reached; its record and its end at the end. Every run drives episodes
 * through this one runner — a local run, a durable one (journal, resume), a distributed worker,
 * an MCP session — so that what an episode does can never differ between them.
 *
 * It knows no folder, journal, queue or socket: what the driver records, and where, comes in as
 * `EpisodeHooks` (a durable driver journals an episode's start and each call before it is
 * dispatched, and says what was committed before a crash). Events go out through `emit`.
 */
import { fileURLToPath } from 'node:url';
import type { AgentEnv } from '../env/agent-env.js';
import { errorInfo, type Action, type AgentInstance } from '../env/agent-instance.js';
import type { ErrorInfo } from '../events/env-events.js';
import type { LlmCallReport } from '../llm/client.js';
import type { EpisodeEndReason, RunEvent, SettledStepEvent } from '../events/run-events.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import type { Clock } from '../shared/clock.js';
import { codeInfo, codesWhere } from '../shared/error-codes.js';
import { AgentError, describeError, isAgentError } from '../shared/errors.js';
import { thrownAt } from '../shared/thrown-at.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { diffStates } from '../state/diff.js';
import type { Policy } from './policy.js';
import type { EpisodeFinishedEvent, InflightCall, JournalEpisode } from './run-journal.js';
import { cleanSum } from '../shared/float-sum.js';

/** The toolkit's own code (src/ and commands/, or dist/'s when built): a policy's error is located in the first frame outside it. */
const TOOLKIT_CODE = ['../', '../../commands/', '../../bin/'].map((rel) => fileURLToPath(new URL(rel, import.meta.url)));

/** How long a run's loop may keep the event loop before it yields to I/O. */
const YIELD_EVERY_MS = 8;

/**
 * Give I/O a turn: a tool that answers at once makes an episode loop pure microtasks, which would
 * starve writers, signals and timers. Yields every few ms, and waits while `writer` (the run
 * folder, if any) catches up.
 */
export function breather(writer: () => { readonly needsDrain: boolean; drained(): Promise<void> } | undefined): () => Promise<void> {
  let last = 0;
  return async () => {
    const w = writer();
    if (performance.now() - last < YIELD_EVERY_MS && !w?.needsDrain) return;
    await new Promise((r) => setImmediate(r));
    await w?.drained();
    last = performance.now();
  };
}

/** Errors of the store itself: a step failing with one was not committed, and the run stops on it. */
export const STORE_FAILURES: ReadonlySet<string> = codesWhere('store');

/** What a journal holds of an episode that was running: the steps it committed and the call it had in flight. */
export interface PriorSteps {
  readonly steps: readonly SettledStepEvent[];
  readonly inflight: InflightCall | undefined;
}

export interface EpisodeHooks {
  /** The episode starts afresh (not restored): a durable driver journals its entry before the instance is reset. */
  starting?(index: number, entry: Extract<JournalEpisode, { status: 'running' }>, signal: AbortSignal): Promise<void>;
  /** A call is about to be dispatched: a durable driver notes it in flight, so a crash during it is known on resume. */
  dispatching?(index: number, call: InflightCall, signal: AbortSignal): Promise<void>;
  /** What was committed of this episode before (a resumed run, or a worker taking it over): it continues from there. */
  prior?(index: number): PriorSteps | undefined;
  /** With `prior`: drop the instance's history after `seq` (deltas of a step whose commit never reached the journal). */
  rewind?(instanceId: string, seq: number, signal: AbortSignal): Promise<void>;
  /** Resolves once every step committed so far is durable where the run keeps them (a durable run's journal has acknowledged it). */
  committed?(signal: AbortSignal): Promise<void>;
  /** The episode's initial state, once the instance holds it. */
  initialState(stateId: string, state: JsonValue): void;
  /** A step settled without a call (one lost in a crash): into the run like any settled step. */
  settled(step: SettledStepEvent): void;
  /** The store failed under the episode: the driver stops the run (the episode ends interrupted). */
  storeFailed(err: AgentError): void;
  /** The episode's end, recorded where the driver records; true when the instance's history is archived with it. */
  close(record: EpisodeRecord | undefined, finished: EpisodeFinishedEvent): Promise<boolean>;
  /** An episode that ran to an end (not interrupted), with its final state. */
  ended?(index: number, finalState: JsonValue): void;
}

/**
 * What an episode is driven by instead of the run's policy loop: a served session's client, which
 * may dispatch many calls before it resolves them (the async API) and ends the episode when it
 * likes (`drive`); or a policy of the episode's own (a rollout request's model) in the same loop.
 */
export interface EpisodeDriver {
  /** Which of the run's initial states the episode starts from (a task's, a seed's); default: the episode's own. */
  readonly initialIndex?: number;
  /** Drives the reset instance until the episode ends; the steps it takes are counted as they commit. */
  drive?(control: EpisodeControl, signal: AbortSignal): Promise<DrivenEnd>;
  /** Without `drive`: the policy the loop asks, instead of the run's. */
  readonly policy?: Policy;
  /** Without `drive`: when it aborts, the loop stops and the episode ends `client_closed` (a cancelled rollout). */
  readonly signal?: AbortSignal;
  /** The run's index of the episode, as it starts (before its first event). */
  begin?(episode: number): void;
  /** The episode's end, whatever ended it (a reset that failed never reaches `drive`). */
  over?(finished: EpisodeFinishedEvent): void;
}

/** How a driven episode ended, and the reward its steps summed. */
export interface DrivenEnd {
  readonly reason: EpisodeEndReason;
  readonly reward: number;
  readonly error?: ErrorInfo;
}

/** What a driver acts on: the episode's instance, and a dispatch that records what was offered. */
export interface EpisodeControl {
  readonly agent: AgentInstance;
  readonly episode: number;
  readonly initialStateId: string;
  readonly maxSteps: number;
  /** The env has a user's side (actions of `"actor": "user"`): a driver offers its client those too. */
  readonly twoSided: boolean;
  /** Steps committed so far. */
  steps(): number;
  /** Dispatch an action (the actions enabled now go into its trajectory record); returns its trace id. */
  dispatch(action: Action): string;
  /** Resolves once the steps settled so far are durable where the run keeps them: a driver acknowledges a step to its client only then. */
  committed(signal: AbortSignal): Promise<void>;
  /** A model call the driver's agent made (a captured program's), recorded as the episode's `llm_call` before its next step. */
  reportLlmCall(call: LlmCallReport): void;
}

export interface EpisodeRunnerOptions {
  readonly env: AgentEnv;
  readonly policy: Policy;
  readonly clock: Clock;
  readonly seed: number;
  readonly maxSteps: number;
  /** Episode i starts from `initialStates[i % length]`. */
  readonly initialStates: readonly JsonValue[];
  readonly emit: (event: RunEvent) => void;
  /** Gives I/O a turn between steps (the driver knows what must drain). */
  readonly breathe: () => Promise<void>;
}

/** Where an episode picks up after a resume. */
interface Continued {
  readonly reward: number;
  readonly lastObservation?: JsonValue;
  readonly done: boolean;
  /** The call in flight at the crash, re-run because its tool is idempotent. */
  readonly redo?: InflightCall;
}

export class EpisodeRunner {
  readonly #o: EpisodeRunnerOptions;
  /** The steps each live instance has committed. */
  readonly #steps = new Map<string, { steps: number }>();
  /** The actions offered to the policy for each trace in flight, for its trajectory record. */
  readonly #offered = new Map<string, readonly string[]>();
  #firstIndex: Map<JsonValue, number> | undefined;
  /** The env has actions of a second side (`"actor": "user"`): its policy is offered them as `user_actions`. */
  readonly #twoSided: boolean;

  constructor(options: EpisodeRunnerOptions) {
    this.#o = options;
    this.#twoSided = [...options.env.definition.actions.values()].some((a) => a.actor === 'user');
  }

  /**
   * A settled step of one of this runner's episodes, committed: counted, and given the actions its
   * policy chose among (for its trajectory record).
   */
  committed(e: SettledStepEvent): SettledStepEvent {
    const counts = this.#steps.get(e.instance_id);
    if (counts) counts.steps++;
    const offered = this.#offered.get(e.trace_id);
    this.#offered.delete(e.trace_id);
    // Object.assign, not a spread followed by a key: on Node 20 that makes a hidden class per object
    // (every reader of the event then goes megamorphic, and JSON.stringify off its fast path).
    return offered ? Object.assign({}, e, { available_actions: offered }) : e;
  }

  /** Episode i's initial state, by the first index it appears at: an object given for many episodes is one state in the folder. */
  stateIndex(episode: number): number {
    const states = this.#o.initialStates;
    if (!this.#firstIndex) {
      const first = new Map<JsonValue, number>();
      states.forEach((s, i) => {
        if (!first.has(s)) first.set(s, i);
      });
      this.#firstIndex = first;
    }
    return this.#firstIndex.get(states[episode % states.length] as JsonValue) ?? episode % states.length;
  }

  /** Run episode `index`: by the policy loop, or by `driver` (a served session). */
  async run(index: number, hooks: EpisodeHooks, signal: AbortSignal, driver?: EpisodeDriver): Promise<EpisodeFinishedEvent> {
    const { env, clock } = this.#o;
    const started = clock.monotonic();
    const agent = env.createInstance({ id: `ep-${index}` });
    const counts = { steps: 0 };
    this.#steps.set(agent.id, counts);
    const stateIndex = driver?.initialIndex ?? this.stateIndex(index);
    const initialStateId = `initial-${stateIndex}`;
    driver?.begin?.(index);
    this.#o.emit({ type: 'episode_started', time: clock.now(), instance_id: agent.id, episode: index, initial_state_id: initialStateId });
    let reward = 0;
    let reason: EpisodeEndReason = 'max_steps';
    let error: ErrorInfo | undefined;
    const initial = this.#o.initialStates[stateIndex] ?? null;
    const startedAt = clock.now();
    /** The initial state as the instance holds it (a frozen copy): the final state is diffed against it. */
    let start: JsonValue | undefined;
    try {
      const continued = await this.#continue(agent, index, initial, counts, hooks, signal);
      if (continued) {
        start = initial;
        reward = continued.reward;
      } else {
        await hooks.starting?.(index, { status: 'running', instance_id: agent.id, initial_state_id: initialStateId, started_at: startedAt }, signal);
        await agent.reset(initial, { signal, episode: index });
        start = agent.state;
      }
      hooks.initialState(initialStateId, start);
      let lastObservation = continued?.lastObservation;
      let lastError: ErrorInfo | undefined;
      let redo = continued?.redo;
      if (continued?.done) reason = 'done';
      else if (driver?.drive) {
        const offeredNow = (): string[] => [...agent.availableActions(), ...(this.#twoSided ? agent.availableActions('user') : [])].map((a) => a.name);
        const end = await driver.drive(
          {
            agent,
            episode: index,
            initialStateId,
            maxSteps: this.#o.maxSteps,
            twoSided: this.#twoSided,
            steps: () => counts.steps,
            dispatch: (action) => this.#record(agent.dispatch(action), offeredNow()),
            committed: (s) => hooks.committed?.(s) ?? Promise.resolve(),
            reportLlmCall: (call) => this.#o.emit({ type: 'llm_call', time: clock.now(), instance_id: agent.id, role: 'policy', ...call, episode: index, step: counts.steps + 1 }),
          },
          signal,
        );
        // A driver sums what it settled; a resumed episode's earlier steps count too.
        reason = end.reason;
        reward = cleanSum(reward + end.reward);
        error = end.error;
      } else {
        const own = driver?.signal;
        const loop = own ? AbortSignal.any([signal, own]) : signal;
        for (let step = counts.steps; step < this.#o.maxSteps; step++) {
          await this.#o.breathe();
          if (loop.aborted) throw loop.reason;
          const actions = agent.availableActions();
          if (actions.length === 0 && !redo) {
            reason = 'no_actions';
            break;
          }
          // One generator per step, not per episode: a resumed episode draws what it would have drawn.
          const rng = new Rng(hashSeed(this.#o.seed, 'policy', index, step));
          const userActions = this.#twoSided ? agent.availableActions('user') : undefined;
          const choice = redo
            ? { name: redo.action, params: redo.params as JsonObject, ...(env.definition.actions.get(redo.action)?.actor === 'user' ? { actor: 'user' as const } : {}) }
            : await this.#choose(driver?.policy ?? this.#o.policy, { state: agent.state, actions, ...(userActions ? { user_actions: userActions } : {}), episode: index, step, ...(lastObservation !== undefined ? { lastObservation } : {}), ...(lastError ? { lastError } : {}) }, agent.id, rng, loop);
          if (choice === null) {
            reason = 'policy_stop';
            break;
          }
          const offered = redo ? redo.available_actions : [...actions, ...(userActions ?? [])].map((a) => a.name);
          redo = undefined;
          const traceId = await this.#dispatch(agent, index, choice, offered, hooks, loop);
          const result = await agent.resolve(traceId, { signal: loop });
          reward = cleanSum(reward + result.reward);
          lastObservation = result.observation;
          lastError = result.info.error;
          if (result.done) {
            reason = 'done';
            break;
          }
        }
      }
    } catch (err) {
      // The store failing under the episode (a hole in its history, lost writes) stops the run, not just the episode.
      if (isAgentError(err) && STORE_FAILURES.has(err.code)) hooks.storeFailed(err);
      const ends = isAgentError(err) ? codeInfo(err.code)?.endReason : undefined;
      if (signal.aborted) reason = 'interrupted';
      else if (driver?.signal?.aborted) reason = 'client_closed';
      else if (ends) {
        // Not a failure of the policy (the model's context ran out): the episode is cut off there, saying why.
        reason = ends;
        error = errorInfo(err as AgentError);
      } else {
        reason = 'policy_error';
        const e = isAgentError(err) ? err : new AgentError('POLICY_FAILED', describeError(err), { cause: err });
        error = errorInfo(e);
      }
    } finally {
      if (agent.status !== 'terminated' && agent.status !== 'archived') await agent.terminate(reason === 'interrupted' ? 'the run was interrupted' : 'episode over');
      env.release(agent.id);
      this.#steps.delete(agent.id);
    }
    const truncated = truncatedBy(reason);
    const record: EpisodeRecord | undefined =
      start === undefined
        ? undefined
        : {
            episode: index,
            instance_id: agent.id,
            initial_state_id: initialStateId,
            final_patch: diffStates(start, agent.state),
            final_seq: agent.seq,
            steps: counts.steps,
            reason,
            terminated: !truncated,
            truncated,
            started_at: startedAt,
            finished_at: clock.now(),
          };
    const finished: EpisodeFinishedEvent = {
      type: 'episode_finished',
      time: clock.now(),
      instance_id: agent.id,
      episode: index,
      steps: counts.steps,
      reward,
      reason,
      duration_ms: clock.monotonic() - started,
      ...(error ? { error } : {}),
    };
    if (await hooks.close(record, finished)) agent.archive();
    if (reason !== 'interrupted') hooks.ended?.(index, agent.state);
    this.#o.emit(finished);
    driver?.over?.(finished);
    return finished;
  }

  /**
   * An episode that was running when its process stopped: back to its last committed step. The
   * store's history is rewound to it (deltas of a step whose commit never reached the journal are
   * dropped); the call in flight is re-run if its tool is idempotent, and otherwise settles as TOOL_LOST.
   */
  async #continue(agent: AgentInstance, index: number, initial: JsonValue, counts: { steps: number }, hooks: EpisodeHooks, signal: AbortSignal): Promise<Continued | undefined> {
    const prior = hooks.prior?.(index);
    if (!prior || !hooks.rewind) return undefined;
    if (!(await this.#o.env.store.bounds(agent.id, signal))) return undefined;
    const steps = prior.steps;
    const last = steps[steps.length - 1];
    const seq = last?.seq ?? 0;
    await hooks.rewind(agent.id, seq, signal);
    let traces = Math.max(0, ...steps.map((s) => traceNumber(s.trace_id)));
    let taken = last?.step ?? 0;
    const call = last?.done ? undefined : prior.inflight;
    let lost: SettledStepEvent | undefined;
    let redo: InflightCall | undefined;
    if (call) {
      traces = Math.max(traces, traceNumber(call.trace_id));
      if (this.#o.env.definition.actions.get(call.action)?.policy.idempotent) redo = call;
      else {
        taken++;
        lost = {
          type: 'trace_settled',
          time: this.#o.clock.now(),
          instance_id: agent.id,
          trace_id: call.trace_id,
          episode: index,
          step: taken,
          action: call.action,
          params: call.params as JsonObject,
          seq_before: seq,
          status: 'failed',
          reward: 0,
          rewards: {},
          done: false,
          seq,
          duration_ms: 0,
          available_actions: call.available_actions,
          error: { code: 'TOOL_LOST', message: `'${call.action}' was in flight when the run's process stopped; its tool is not declared idempotent, so it was not run again`, hint: `If calling it twice is safe, declare it idempotent in env.json: "tools": {"${call.action}": {"idempotent": true}} (an env of the three files gets an env.json beside them: {"state": "state_schema.json", "actions": "action_schema.json", "rewards": "reward_schema.json", "module": "<its tools module>", "tools": {…}}).` },
        };
      }
    }
    const trajectory = steps.filter((s) => s.status === 'resolved').map((s) => ({ action: s.action, params: s.params, ...(s.observation !== undefined ? { observation: s.observation } : {}) }));
    await agent.restore({ episode: index, seq, steps: taken, traces, initial, trajectory }, { signal });
    counts.steps = last?.step ?? 0;
    if (lost) hooks.settled(lost);
    return {
      reward: steps.reduce((sum, s) => sum + s.reward, 0),
      ...(last?.observation !== undefined ? { lastObservation: last.observation } : {}),
      done: last?.done === true,
      ...(redo ? { redo } : {}),
    };
  }

  /** Ask the policy for an action; null when it stops. */
  async #choose(policy: Policy, observation: Parameters<Policy>[0], instanceId: string, rng: Rng, signal: AbortSignal): Promise<Action | null> {
    const reportLlmCall = (role: 'policy' | 'user', call: LlmCallReport): void =>
      this.#o.emit({ type: 'llm_call', time: this.#o.clock.now(), instance_id: instanceId, role, ...call, episode: observation.episode, step: observation.step + 1 });
    try {
      return await policy(observation, { rng, signal, reportLlmCall });
    } catch (err) {
      if (isAgentError(err)) throw err;
      const at = thrownAt(err, TOOLKIT_CODE);
      throw new AgentError('POLICY_FAILED', `the policy threw: ${describeError(err)}${at ? ` (at ${at})` : ''}`, { cause: err, hint: at ? `Fix the policy at ${at}.` : 'Fix the policy module.' });
    }
  }

  /** Dispatch the chosen action, after the driver has noted the call in flight (if it keeps a journal). */
  async #dispatch(agent: AgentInstance, index: number, action: Action, offered: readonly string[], hooks: EpisodeHooks, signal: AbortSignal): Promise<string> {
    if (hooks.dispatching) await hooks.dispatching(index, { trace_id: `${agent.id}:${agent.traces + 1}`, action: action.name, params: action.params ?? {}, available_actions: offered }, signal);
    return this.#record(agent.dispatch(action), offered);
  }

  #record(traceId: string, offered: readonly string[]): string {
    this.#offered.set(traceId, offered);
    return traceId;
  }
}

/** Whether an episode that ended so was cut short (truncated) rather than over by the env's or the policy's own end (terminated). */
export function truncatedBy(reason: EpisodeEndReason): boolean {
  return reason === 'max_steps' || reason === 'interrupted' || reason === 'policy_error' || reason === 'client_closed' || reason === 'client_lost' || reason === 'context_limit' || reason === 'time_limit' || reason === 'max_turns';
}

/** The number at the end of a trace id (`ep-3:7` → 7). */
function traceNumber(traceId: string): number {
  const n = Number(traceId.slice(traceId.lastIndexOf(':') + 1));
  return Number.isInteger(n) ? n : 0;
}


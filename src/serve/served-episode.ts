/**
 * One served episode: an episode of the run, driven by its client instead of a policy. The client
 * resets (the run's EpisodeRunner resets the instance and hands it over), then steps — or, with
 * the async API, dispatches many calls and resolves them in batches — until the env says done, the
 * step limit is reached, or the client leaves (the episode then ends truncated, `client_closed`).
 */
import type { Action } from '../env/agent-instance.js';
import type { EpisodeEndReason } from '../events/run-events.js';
import type { DrivenEnd, EpisodeControl, EpisodeDriver } from '../run/episode-runner.js';
import type { EpisodeFinishedEvent } from '../run/run-journal.js';
import type { PolicyTask } from '../run/policy.js';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { stepEnvelope, ToolLists, type ServedObservation, type StepEnvelope } from './protocol.js';
import { cleanSum } from '../shared/float-sum.js';

/** A benchmark task a served suite's episode runs (reset with `task_id`), as its observations carry it. */
export type ServedTask = PolicyTask;

export interface ServedState {
  readonly episode_id: string;
  readonly step_count: number;
  readonly state: JsonValue;
  readonly seq: number;
  readonly done: boolean;
}

export class ServedEpisode implements EpisodeDriver {
  readonly initialIndex: number;
  readonly task: ServedTask | undefined;
  /** The episode's public id: the client's, or one the server drew (never the instance's `ep-<n>`, which is guessable). */
  readonly id: string;
  #control: EpisodeControl | undefined;
  #finish!: (end: DrivenEnd) => void;
  readonly #ended: Promise<DrivenEnd>;
  #endReason: EpisodeEndReason | undefined;
  #reward = 0;
  #dispatched = 0;
  #settled = 0;

  /** The server's: the episodes of one env share their tool lists. */
  readonly tools: ToolLists;

  constructor(initialIndex: number, options: { readonly episodeId: string; readonly task?: ServedTask; readonly tools?: ToolLists }) {
    this.initialIndex = initialIndex;
    this.task = options.task;
    this.id = options.episodeId;
    this.tools = options.tools ?? new ToolLists();
    this.#ended = new Promise((resolve) => (this.#finish = resolve));
  }

  /** The run's index of the episode (its `episode` in every record), once it started. */
  get index(): number | undefined {
    return this.#control?.episode;
  }

  /** Resolves when the episode ends, whatever ended it. */
  get closed(): Promise<DrivenEnd> {
    return this.#ended;
  }

  get done(): boolean {
    return this.#endReason !== undefined;
  }

  drive(control: EpisodeControl, signal: AbortSignal): Promise<DrivenEnd> {
    this.#control = control;
    const stop = (): void => this.end('interrupted');
    signal.addEventListener('abort', stop, { once: true });
    return this.#ended.finally(() => signal.removeEventListener('abort', stop));
  }

  /** The episode is over in the run, whatever ended it (a reset that failed never reaches `drive`). */
  over(finished: EpisodeFinishedEvent): void {
    this.end(finished.reason);
  }

  /** Ends the episode (a no-op once ended): `client_closed` when its client leaves before it is done, `client_lost` when it stopped answering. */
  end(reason: EpisodeEndReason = 'client_closed'): void {
    if (this.#endReason !== undefined) return;
    this.#endReason = reason;
    this.#finish({ reason, reward: this.#reward });
  }

  /** What reset answers: no tool output yet, the actions enabled in the initial state. */
  resetEnvelope(): StepEnvelope {
    return { observation: Object.assign(this.#base(), { observation: null, trace_id: null }), reward: null, done: false, truncated: false, rewards: {} };
  }

  /** Dispatch an action; returns its trace id at once (the call runs while the client does other work). */
  dispatch(action: Action): string {
    const control = this.#live();
    if (this.#dispatched >= control.maxSteps) {
      throw new AgentError('EPISODE_DONE', `episode '${this.id}' has dispatched its ${control.maxSteps} steps (the server's --max-steps)`, { hint: 'Resolve what is in flight, then reset for a new episode.' });
    }
    const traceId = control.dispatch(action);
    this.#dispatched++;
    return traceId;
  }

  /**
   * Settle calls: each one's envelope, in the order asked. With `timeoutMs`, a call still running
   * then comes back with `info.status` "timeout" and a null reward, and can be resolved again.
   */
  async resolve(traceIds: readonly string[], options: { readonly timeoutMs?: number; readonly signal: AbortSignal }): Promise<StepEnvelope[]> {
    const control = this.#live();
    // Without a timeout the wait needs no abort listener: the client leaving ends the episode, whose
    // instance then settles every call in flight as cancelled (tools that ignore their signal too).
    const within = options.timeoutMs !== undefined ? { signal: options.signal, timeoutMs: options.timeoutMs } : undefined;
    const results = await Promise.all(traceIds.map((id) => control.agent.resolve(id, within)));
    // A step is acknowledged only once it is durable where the run keeps its steps (with a Redis
    // store, in its journal): a server killed after answering loses nothing its client was told.
    if (results.some((r) => r.info.status !== 'timeout')) await control.committed(options.signal);
    const envelopes: StepEnvelope[] = [];
    for (const result of results) {
      let truncated = false;
      if (result.info.status !== 'timeout') {
        this.#settled++;
        this.#reward = cleanSum(this.#reward + result.reward);
        truncated = !result.done && this.#settled >= control.maxSteps;
        if (result.done) this.end('done');
        else if (truncated) this.end('max_steps');
      }
      envelopes.push(stepEnvelope(result, this.#base(), truncated));
    }
    return envelopes;
  }

  /** OpenEnv's `step`: dispatch, then wait for the call to settle. */
  async step(action: Action, signal: AbortSignal): Promise<StepEnvelope> {
    const traceId = this.dispatch(action);
    const [envelope] = await this.resolve([traceId], { signal });
    return envelope as StepEnvelope;
  }

  state(): ServedState {
    const { agent } = this.#started();
    return { episode_id: this.id, step_count: this.#settled, state: agent.state, seq: agent.seq, done: this.done };
  }

  /** Time travel: the episode's state as it stood at `seq`. */
  async stateAt(seq: number, signal: AbortSignal): Promise<ServedState> {
    const { agent } = this.#started();
    const snapshot = await agent.stateAt({ seq }, signal);
    return { episode_id: this.id, step_count: this.#settled, state: snapshot.state, seq: snapshot.seq, done: this.done };
  }

  #base(): Omit<ServedObservation, 'observation' | 'trace_id' | 'error'> {
    const { agent, twoSided } = this.#started();
    return {
      actions: this.tools.of(this.done ? [] : agent.availableActions()),
      ...(twoSided ? { user_actions: this.tools.of(this.done ? [] : agent.availableActions('user')) } : {}),
      episode_id: this.id,
      step: this.#settled,
      ...(this.task ? { task_id: this.task.id, instruction: this.task.instruction } : {}),
    };
  }

  #started(): EpisodeControl {
    if (!this.#control) throw new AgentError('EPISODE_DONE', 'no episode yet: send reset first');
    return this.#control;
  }

  #live(): EpisodeControl {
    const control = this.#started();
    if (this.#endReason !== undefined) throw new AgentError('EPISODE_DONE', `episode '${this.id}' is over (${this.#endReason})`, { hint: 'Send reset to start the next episode.' });
    return control;
  }
}

/**
 * An env's rewards (`env.rewards`): the ledger, the sources that compute values (modules and LLM
 * judges, run off the step's critical path under their own timeout, retry and concurrency), the
 * deadline timer, and `submit` for values delivered from outside. Instances call
 * `stepSettled` and `episodeEnded`; everything else reaches users as `reward_*` events.
 */
import type { EnvEvent, RewardEntry } from '../events/env-events.js';
import { isComputed, type EnvDefinition, type RewardSourceDefinition } from '../schema/definition.js';
import type { Clock } from '../shared/clock.js';
import { setMaxListeners } from 'node:events';
import { AgentError, describeError, oneLine } from '../shared/errors.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { raceAbort } from '../shared/abort.js';
import { buildPolicyStack, type PolicyStack } from '../tools/policy.js';
import type { LlmCallReport } from '../llm/client.js';
import { RewardLedger, type DeliveryResult, type RewardBasis, type RewardDelivery, type SourceSla, type StepRef } from './ledger.js';
import { sourceEvaluator, type EvaluatorStats, type RestoredStep, type SettledStep, type SourceEvaluator, type StepJudgement } from './evaluators.js';

export type { SettledStep } from './evaluators.js';

interface ActiveSource {
  readonly def: RewardSourceDefinition;
  readonly evaluator: SourceEvaluator;
  /** Timeout and retry. Concurrency is ours (`limit`): cockatiel's bulkhead stops draining its queue once the signal it was given aborts. */
  readonly stack: PolicyStack;
  readonly limit: number;
  running: number;
  readonly waiting: (() => void)[];
}

interface EpisodeLog {
  readonly initial: JsonValue;
  readonly steps: { action: string; params: JsonObject; observation?: JsonValue; state: JsonValue }[];
}

/** The longest timer Node keeps (about 24.8 days); a later deadline is re-armed when it fires. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Ended episodes whose rewards are all final that the live ledger keeps (a value for one of their
 * steps is late or a duplicate by then): the rest are dropped, their returns kept.
 */
const RETAINED_EPISODES = 1_000;

export class EnvRewards implements AsyncDisposable {
  readonly ledger: RewardLedger;
  readonly #clock: Clock;
  readonly #emit: (e: EnvEvent) => void;
  /** Evaluations are cancelled when the rewards close, not when the env's tools are: an episode-scoped judge starts as the env terminates its instances. */
  readonly #abort = new AbortController();
  readonly #stepSources: ActiveSource[] = [];
  readonly #episodeSources: ActiveSource[] = [];
  /** Evaluations running or queued, each with its instance. */
  readonly #inFlight = new Map<Promise<void>, string>();
  readonly #episodes = new Map<string, EpisodeLog>();
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  #closed = false;

  constructor(definition: EnvDefinition, options: { readonly clock: Clock; readonly emit: (e: EnvEvent) => void }) {
    this.#clock = options.clock;
    this.#emit = options.emit;
    setMaxListeners(0, this.#abort.signal);
    this.ledger = new RewardLedger(definition.rewards, { now: () => options.clock.now(), emit: options.emit, retainEpisodes: RETAINED_EPISODES });
    for (const def of definition.rewards.values()) {
      const b = def.binding;
      if (!isComputed(b)) continue;
      const { concurrency, queue: _queue, ...policy } = b.policy;
      const source: ActiveSource = { def, evaluator: sourceEvaluator(def), stack: buildPolicyStack(`reward source '${def.name}'`, policy), limit: concurrency ?? 16, running: 0, waiting: [] };
      (b.scope === 'episode' ? this.#episodeSources : this.#stepSources).push(source);
    }
  }

  /** False when every source is reported by its tool: instances then skip the ledger entirely. */
  get active(): boolean {
    return this.ledger.hasDelayed;
  }

  /**
   * A step settled with a result: open it in the ledger, start the sources that judge it, and
   * return its delayed sources' entries as of now (pending, mostly).
   */
  stepSettled(step: SettledStep): Record<string, RewardEntry> {
    const judging = this.#stepSources.filter((s) => applies(s.def, step));
    const skipped = new Set(this.#stepSources.filter((s) => !judging.includes(s)).map((s) => s.def.name));
    const episodeScoped = new Set(this.#episodeSources.map((s) => s.def.name));
    this.ledger.open(step, step.immediate, this.ledger.delayedSources.filter((n) => !skipped.has(n) && !episodeScoped.has(n)));
    if (this.#episodeSources.length > 0) {
      const log = this.#episodes.get(episodeKey(step.instanceId, step.episode));
      log?.steps.push({ action: step.action, params: step.params, ...(step.observation !== undefined ? { observation: step.observation } : {}), state: step.stateAfter });
    }
    for (const s of judging) this.#evaluate(s, step.traceId, { kind: 'step', step });
    this.#arm();
    return this.ledger.entries(step.traceId) ?? {};
  }

  /** An episode began: episode-scoped sources need its initial state. */
  episodeStarted(instanceId: string, episode: number, initial: JsonValue): void {
    if (this.#episodeSources.length > 0) this.#episodes.set(episodeKey(instanceId, episode), { initial, steps: [] });
  }

  /** An episode continued after a crash: its steps so far, for episode-scoped sources. */
  episodeRestored(instanceId: string, episode: number, initial: JsonValue, steps: readonly RestoredStep[], current: JsonValue): void {
    if (this.#episodeSources.length === 0) return;
    const log: EpisodeLog = { initial, steps: steps.map((s) => ({ ...s, state: current })) };
    this.#episodes.set(episodeKey(instanceId, episode), log);
  }

  /** An episode ended (reset or terminate): episode-scoped sources judge it, landing on its last step. */
  episodeEnded(instanceId: string, episode: number): void {
    const log = this.#episodes.get(episodeKey(instanceId, episode));
    this.#episodes.delete(episodeKey(instanceId, episode));
    const last = this.ledger.lastStep(instanceId, episode);
    if (log && last) {
      const final = log.steps[log.steps.length - 1]?.state ?? log.initial;
      for (const s of this.#episodeSources) {
        const judgement: StepJudgement = { kind: 'episode', step: last, initial: log.initial, final, trajectory: log.steps.map(({ state: _s, ...rest }) => rest) };
        if (!appliesEpisode(s.def, judgement)) continue;
        this.ledger.expect(last.traceId, s.def.name);
        this.#evaluate(s, last.traceId, judgement);
      }
    }
    // Its steps are kept until older ended episodes are many: a long-lived server's memory stays flat.
    this.ledger.episodeEnded(instanceId, episode);
    this.#arm();
  }

  #emitLlmCall(call: LlmCallReport, source: string, step: StepRef): void {
    if (this.#closed) return;
    this.#emit({ type: 'llm_call', time: this.#clock.now(), instance_id: step.instanceId, role: 'judge', ...call, episode: step.episode, step: step.step, trace_id: step.traceId, source });
  }

  #evaluate(s: ActiveSource, traceId: string, judgement: StepJudgement): void {
    const work = new Promise<void>((done) => {
      const start = (): void => {
        if (this.#closed) return done();
        s.running++;
        s.stack
          .execute((signal) => s.evaluator.evaluate(judgement, signal(), (call) => this.#emitLlmCall(call, s.def.name, judgement.step)), this.#abort.signal)
          .then(
            ({ value, cost }) => {
              if (this.#closed) return;
              try {
                this.ledger.deliver({ trace_id: traceId, source: s.def.name, value }, undefined, cost);
              } catch (err) {
                this.ledger.fail(traceId, s.def.name, oneLine(describeError(err)));
              }
            },
            (err: unknown) => {
              if (!this.#closed) this.ledger.fail(traceId, s.def.name, oneLine(describeError(err)));
            },
          )
          .finally(() => {
            s.running--;
            s.waiting.shift()?.();
            done();
          });
      };
      if (s.running < s.limit) start();
      else s.waiting.push(start);
    }).finally(() => {
      this.#inFlight.delete(work);
      this.#arm();
    });
    this.#inFlight.set(work, judgement.step.instanceId);
  }

  /**
   * Deliver values from outside (a human reviewer, a business metric): each lands on its step, or
   * throws a typed error naming the bad field, with nothing changed.
   */
  submit(delivery: RewardDelivery): DeliveryResult {
    this.ledger.expire();
    const result = this.ledger.deliver(delivery);
    this.#arm();
    return result;
  }

  /** Apply the deadlines that are due now (the timer does this by itself; for a clock that does not drive timers). */
  expireDue(): number {
    const n = this.ledger.expire();
    this.#arm();
    return n;
  }

  entries(traceId: string): Record<string, RewardEntry> | undefined {
    return this.ledger.entries(traceId);
  }

  reward(traceId: string, basis: RewardBasis = 'final'): number | undefined {
    return this.ledger.reward(traceId, basis);
  }

  sla(): Record<string, SourceSla> {
    return this.ledger.sla();
  }

  /** Calls, failures, tokens and cost of each module and judge source. */
  sourceStats(): Record<string, EvaluatorStats> {
    const out: Record<string, EvaluatorStats> = {};
    for (const s of [...this.#stepSources, ...this.#episodeSources]) out[s.def.name] = s.evaluator.stats();
    return out;
  }

  /** Evaluations still running. */
  get evaluating(): number {
    return this.#inFlight.size;
  }

  /**
   * Wait until every started evaluation (of instance `instanceId` only, when given: one episode's,
   * not those its siblings keep starting) has delivered or failed; aborting `signal` stops waiting.
   */
  async settle(signal?: AbortSignal, instanceId?: string): Promise<void> {
    const running = (): Promise<void>[] => [...this.#inFlight].flatMap(([work, of]) => (instanceId === undefined || of === instanceId ? [work] : []));
    for (let works = running(); works.length > 0 && !signal?.aborted; works = running()) {
      await raceAbort(Promise.allSettled(works), signal).catch(() => undefined);
    }
  }

  /** One timer, for the earliest deadline; re-armed whenever that changes. */
  #arm(): void {
    if (this.#closed) return;
    const next = this.ledger.nextDeadline();
    if (next === undefined || next >= this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timerAt = next;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAt = Infinity;
        this.ledger.expire();
        this.#arm();
      },
      Math.min(MAX_TIMER_MS, Math.max(0, next - this.#clock.now())),
    );
    // Deadlines must not keep a process alive that has nothing else to do: `agent reward` applies them later.
    this.#timer.unref();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    this.#abort.abort(new AgentError('TOOL_CANCELLED', 'the env was closed'));
    clearTimeout(this.#timer);
    this.#timer = undefined;
    // Evaluations still queued never start; the running ones see their signal abort.
    for (const s of [...this.#stepSources, ...this.#episodeSources]) for (let next = s.waiting.shift(); next; next = s.waiting.shift()) next();
    await Promise.allSettled([...this.#inFlight.keys()]);
    await Promise.allSettled([...this.#stepSources, ...this.#episodeSources].map((s) => s.evaluator.close()));
  }
}

function episodeKey(instanceId: string, episode: number): string {
  return `${instanceId}\u0000${episode}`;
}

/** `when` is evaluated on the step: {action, params, observation, state (after), state_before, step, episode}. */
function applies(def: RewardSourceDefinition, step: SettledStep): boolean {
  const b = def.binding;
  if (!isComputed(b) || !b.when) return true;
  return b.when.evaluate({ action: step.action, params: step.params, observation: step.observation ?? null, state: step.stateAfter, state_before: step.stateBefore, step: step.step, episode: step.episode });
}

function appliesEpisode(def: RewardSourceDefinition, j: Extract<StepJudgement, { kind: 'episode' }>): boolean {
  const b = def.binding;
  if (!isComputed(b) || !b.when) return true;
  return b.when.evaluate({ action: j.step.action, state: j.final, state_before: j.initial, step: j.step.step, episode: j.step.episode, steps: j.trajectory.length });
}

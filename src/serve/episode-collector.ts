/**
 * One rollout episode's events as they arrive: its model turns (token mode), each step's reward
 * as it stands, and the delayed rewards it still awaits.
 */
import type { EpisodeFinishedEvent } from '../run/run-journal.js';
import type { RunEvent } from '../events/run-events.js';
import type { TurnOf } from '../replay/token-export.js';

/**
 * One episode of a group, as its events arrive; `complete` resolves once it is over and no reward
 * it awaits is pending, or once it has waited `waitMs` for them (`missing` says which never came).
 */
export class EpisodeCollector {
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


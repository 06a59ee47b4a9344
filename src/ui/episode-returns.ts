/**
 * An episode's return as its events tell it, live: the sum of its steps' rewards, each step's the
 * latest its events carry (a delayed source's value counts once it lands, late ones too, as the run
 * folder and `agent export` count them), and how many delayed values it still awaits. The progress
 * line and the live view show this, so that an episode's reward reads the same there as in the
 * summary and the export once everything has landed, and says what has not.
 */
import type { RunEvent } from '../events/run-events.js';
import { cleanSum } from '../shared/float-sum.js';

interface Tally {
  /** Each step's reward so far (a failed step counts 0). */
  readonly steps: Map<number, number>;
  /** `trace|source` of each value still awaited. */
  readonly pending: Set<string>;
}

export interface EpisodeReturn {
  readonly value: number;
  /** Delayed values not landed yet (imputed and failed ones have). */
  readonly pending: number;
}

export class EpisodeReturns {
  readonly #episodes = new Map<number, Tally>();

  take(e: RunEvent): void {
    switch (e.type) {
      case 'trace_settled': {
        let t = this.#episodes.get(e.episode);
        if (!t) this.#episodes.set(e.episode, (t = { steps: new Map(), pending: new Set() }));
        t.steps.set(e.step, e.status === 'resolved' ? e.reward : 0);
        for (const [source, entry] of Object.entries(e.rewards)) if (entry.status === 'pending') t.pending.add(`${e.trace_id}|${source}`);
        break;
      }
      case 'reward_arrived':
      case 'reward_imputed':
      case 'reward_late': {
        const t = this.#episodes.get(e.episode);
        if (!t) break;
        t.pending.delete(`${e.trace_id}|${e.source}`);
        // A reward event carries its step's reward with the new value in.
        if (t.steps.has(e.step)) t.steps.set(e.step, e.reward);
        break;
      }
      case 'reward_failed':
        this.#episodes.get(e.episode)?.pending.delete(`${e.trace_id}|${e.source}`);
        break;
      default:
        break;
    }
  }

  of(episode: number): EpisodeReturn {
    const t = this.#episodes.get(episode);
    let value = 0;
    for (const r of t?.steps.values() ?? []) value += r;
    return { value: cleanSum(value), pending: t?.pending.size ?? 0 };
  }

  /** Stop following an episode (its values still landing are then ignored). */
  forget(episode: number): void {
    this.#episodes.delete(episode);
  }
}

/** `-1.9`, or `-1.9 (10 pending)` while delayed values are still to land. */
export function returnText(r: EpisodeReturn, format: (n: number) => string): string {
  return r.pending > 0 ? `${format(r.value)} (${r.pending} pending)` : format(r.value);
}

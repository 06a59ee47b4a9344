/**
 * Subscribes an ink view to a run: finished episodes accumulate (for <Static>), warnings too,
 * and the live progress is re-read on a timer so ages and rates tick. The timer and the
 * subscription end when the component unmounts.
 */
import { useEffect, useState } from 'react';
import type { RunProgress } from '../run/run-stats.js';
import { warningOf } from './plain-reporter.js';
import { oneLine } from '../shared/errors.js';
import type { RunSource } from './run-source.js';
import { EpisodeReturns } from './episode-returns.js';

export interface EpisodeRow {
  readonly episode: number;
  readonly steps: number;
  /** Its return when it ended, delayed values landed by then included. */
  readonly reward: number;
  /** Delayed values it still awaited when it ended. */
  readonly pending: number;
  readonly durationMs: number;
  readonly reason: string;
  readonly error?: string;
}

export interface RunViewState {
  readonly progress: RunProgress;
  readonly finished: readonly EpisodeRow[];
  readonly warnings: readonly string[];
}

export function useRunView(source: RunSource, refreshMs = 100): RunViewState {
  const [state, setState] = useState<RunViewState>(() => ({ progress: source.progress(), finished: [], warnings: [] }));
  useEffect(() => {
    const returns = new EpisodeReturns();
    const off = source.events.onAny((e) => {
      returns.take(e);
      if (e.type === 'episode_finished') {
        const r = returns.of(e.episode);
        returns.forget(e.episode);
        const row: EpisodeRow = { episode: e.episode, steps: e.steps, reward: r.value, pending: r.pending, durationMs: e.duration_ms, reason: e.reason, ...(e.error ? { error: oneLine(e.error.message) } : {}) };
        setState((s) => ({ ...s, progress: source.progress(), finished: [...s.finished, row] }));
      } else {
        const w = warningOf(e);
        if (w !== undefined) setState((s) => ({ ...s, warnings: [...s.warnings.slice(-4), w] }));
      }
    });
    const timer = setInterval(() => setState((s) => ({ ...s, progress: source.progress() })), refreshMs);
    return () => {
      off();
      clearInterval(timer);
    };
  }, [source, refreshMs]);
  return state;
}

/**
 * A recorded run: the parts of a run folder's trajectories that a seed determines (no times, no
 * durations, no run id), so that a recording in fixtures/ can be replayed and compared in CI.
 */
import type { TrajectoryRecord } from './run-writer.js';

/** One step of a recorded episode, as a regression test replays it. */
export type RecordedStep = Pick<TrajectoryRecord, 'episode' | 'step' | 'action' | 'params' | 'status' | 'observation' | 'reward' | 'done' | 'state_seq'> & {
  /** Status and value per source: arrival times are the clock's, not the seed's. */
  readonly rewards: Readonly<Record<string, { readonly status: string; readonly value: number | null }>>;
};

/** The steps of recorded trajectories, in order, for replay. */
export function recordedSteps(trajectories: readonly TrajectoryRecord[]): RecordedStep[] {
  return trajectories
    .map(({ episode, step, action, params, status, observation, reward, rewards, done, state_seq }) => ({
      episode,
      step,
      action,
      params,
      status,
      ...(observation !== undefined ? { observation } : {}),
      reward,
      rewards: Object.fromEntries(Object.entries(rewards).map(([name, e]) => [name, { status: e.status, value: e.value }])),
      done,
      state_seq,
    }))
    .sort((a, b) => a.episode - b.episode || a.step - b.step);
}

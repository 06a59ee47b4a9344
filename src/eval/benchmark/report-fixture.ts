/** A synthetic benchmark report for the report page's tests: `tasks` tasks, each trial's result from `trial`. */
import type { BenchmarkReport, TrialResult } from './report.js';

const estimate = (value: number) => ({ value, ci_low: value, ci_high: value });

export function syntheticReport(tasks: number, options: { suite?: string; policy?: string; trials?: number; taskId?: (i: number) => string; trial: (i: number, trial: number) => Partial<TrialResult> }): BenchmarkReport {
  const trials = options.trials ?? 1;
  return {
    schema_version: 1,
    suite: options.suite ?? 'synthetic',
    split: 'test',
    policy: options.policy ?? 'random',
    trials,
    seed: 0,
    run_dir: '/tmp/run',
    started_at: '2026-12-01T00:00:00.000Z',
    duration_ms: 1000,
    metrics: {
      success_rate: estimate(0.5),
      pass_hat_k: Object.fromEntries(Array.from({ length: trials }, (_, k) => [String(k + 1), 0.5 - 0.1 * k])),
      reward: estimate(trials > 1 ? 0.5 : 1),
      reward_by_source: {},
      steps_per_episode: estimate(3),
      tool_success_rate: estimate(0.9),
      invalid_action_rate: estimate(0),
      pii_leak_rate: estimate(0),
      do_nothing_floor: 0,
      tools: {},
    },
    tasks: Array.from({ length: tasks }, (_, i) => ({
      id: options.taskId?.(i) ?? `task-${i}`,
      trials: Array.from({ length: trials }, (_, trial) => ({ trial, episode: trials * i + trial, steps: 3, reason: 'done', ...options.trial(i, trial) })),
    })),
  } as unknown as BenchmarkReport;
}

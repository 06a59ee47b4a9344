/**
 * `agentic-rl-toolkit/benchmark`: what `agent benchmark` does, as a library: a suite's tasks
 * (τ-bench's and τ²-bench's domains ship with the toolkit) run with a policy, scored against their
 * gold outcomes (a suite's own check may ask a judge model), compared with a baseline; and a suite as a verl RL dataset.
 *
 * @module agentic-rl-toolkit/benchmark
 */
export { equalJson, runBenchmark, type BenchmarkOptions, type BenchmarkReport, type CheckResult, type EpisodeOutcome, type ToolMetrics, type TrialResult } from './eval/benchmark/benchmark.js';
export type { CheckContext, JudgePrompt, JudgeUsage } from './eval/benchmark/judge.js';
export { compareWithBaseline, loadBaseline, type Baseline } from './eval/benchmark/baseline.js';
export type { BaselineComparison, MetricComparison } from './eval/benchmark/report.js';
export { BUILT_IN_SUITES, listSuites, resolveSuite, type SuiteListing } from './eval/benchmark/suites.js';
export { loadSuite, type BenchmarkTask, type SuccessCriterion, type Suite } from './eval/benchmark/suite.js';
export type { Estimate } from './eval/benchmark/stats.js';
export { VERL_INTERACTION, verlDataset, writeVerlParquet, type VerlRow } from './eval/benchmark/verl-dataset.js';

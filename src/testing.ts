/**
 * `agentic-rl-toolkit/testing`: for an env's own tests: a clock the test moves (delays, deadlines,
 * retries without sleeping), and a recorded episode's steps to replay as a regression test.
 *
 * @module agentic-rl-toolkit/testing
 */
export { ManualClock } from './shared/clock.js';
export { recordedSteps, type RecordedStep } from './replay/recording.js';

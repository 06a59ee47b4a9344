/**
 * `agentic-rl-toolkit/distributed`: a run's episodes on many machines: the Redis queue a
 * coordinator fills, the rollout worker that takes episodes from it (what `agent worker` runs),
 * and the worker's health endpoint.
 *
 * @module agentic-rl-toolkit/distributed
 */
export { RolloutWorker, type WorkerEvent, type WorkerOptions, type WorkerSummary } from './run/rollout-worker.js';
export type { WorkerEpisodeOutcome } from './run/worker-run.js';
export { DEFAULT_QUEUE, EpisodeQueue, type Claim, type WorkerHeartbeat } from './run/episode-queue.js';
export type { WorkerRow } from './events/run-events.js';
export { serveWorkerHealth, type WorkerHealthOptions } from './server/worker-health.js';

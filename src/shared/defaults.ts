/**
 * The defaults of the toolkit's options, once: the library applies them when an option is left
 * out, the command line shows them as its flags' defaults (so `--help` and the CLI reference page
 * say the same), and nothing else writes them down. A leaf module with no imports: the command
 * line reads it at start without loading the library (scripts/check-imports.ts allows only this).
 */

/** `agent run` and `Run.prepare`. */
export const RUN_DEFAULTS = {
  episodes: 20,
  concurrency: 8,
  maxSteps: 10,
  seed: 0,
  policy: 'random',
  out: 'runs',
  /** The Redis queue of a distributed run and its workers. */
  queue: 'agent:queue',
  /** How long a durable run waits for an unreachable Redis before it stops, resumable. */
  storeWaitMs: 60_000,
  host: '127.0.0.1',
} as const;

/** `agent serve` and `serveEnv`. */
export const SERVE_DEFAULTS = {
  port: 8000,
  maxSessions: 1_024,
  maxSteps: 100,
  /** An HTTP session with no request for this long ends. */
  httpIdleMs: 300_000,
  /** A WebSocket peer that answers nothing for this long is cut off (`client_lost`). */
  wsTimeoutMs: 30_000,
  split: 'test',
  /** A rollouts request's episodes running at once, unless it asks otherwise. */
  rolloutConcurrency: 16,
  /** Times a stale group is run again before it is dropped (`stale: "rerun"`). */
  staleReruns: 2,
  /** How long a rollouts group waits, once an episode of it is over, for the rewards still pending on it; then it goes, saying what was missing. */
  rewardWaitMs: 60_000,
  /** A rollouts request's bounds: episodes per task (the group size), tasks, and episodes in all. */
  maxGroupSize: 1_024,
  maxRolloutTasks: 10_000,
  maxRolloutEpisodes: 100_000,
  /** A request that draws its tasks (`groups: N`): at most this over-sampling, and groups tried per group asked for unless it says (`max_tries`). */
  maxOversample: 4,
  triesPerGroup: 4,
  /** The curriculum: the outcomes kept per task (its recent success), and the least weight the difficulty sampler gives a task (solved or hopeless ones still come back now and then). */
  curriculumWindow: 16,
  curriculumFloor: 0.05,
} as const;

/** An agent program (`--policy cmd:`) in each episode it drives. */
export const PROGRAM_DEFAULTS = {
  /** Model calls per episode: the one past it is refused and the episode ends `max_turns`. */
  maxTurns: 256,
  /** Wall time per episode: past it the program's process tree is killed, `time_limit` (a program that never exits, or never calls the model, still ends). */
  timeoutMs: 1_800_000,
  /** A program run in its env's sandbox: memory of all its processes, and processes at once (an interpreter, its SDK and threads). */
  sandboxMemoryMb: 2_048,
  sandboxPids: 256,
} as const;

/** A sandboxed command's limits (`agent sandbox run`, tools of kind `sandbox`). */
export const SANDBOX_DEFAULTS = {
  cpuSeconds: 10,
  memoryMb: 512,
  pids: 64,
  fileSizeMb: 64,
  /** Of stdout and of stderr each: the rest is counted, not kept. */
  outputBytes: 65_536,
  timeoutMs: 30_000,
  /** Sandboxed commands running at once in one process; more wait their turn. */
  concurrency: 64,
} as const;

/** `agent worker` and `RolloutWorker`. */
export const WORKER_DEFAULTS = {
  concurrency: 4,
  /** How long an episode stays a worker's without renewal. */
  leaseMs: 10_000,
  /** Claims of one episode with no step committed between them before it is given up (`worker_lost`). */
  maxAttempts: 3,
} as const;

/** `agent mcp-serve` and `serveEnvOverStdio`. */
export const MCP_SERVE_DEFAULTS = {
  episodes: 1_000,
  maxSteps: 1_000,
} as const;

/** `agent benchmark` and `runBenchmark`. */
export const BENCHMARK_DEFAULTS = {
  split: 'test',
  trials: 1,
  concurrency: 8,
} as const;

/** `llm:<model>` policies (`agent run`, `agent benchmark`). */
export const LLM_DEFAULTS = {
  /** Sent on every request (vLLM's own default of 16 cuts a tool call short). */
  maxTokens: 2_048,
  /** Chat mode: greedy, for evaluation. */
  temperature: 0,
  /** Token mode (`--tokens`): the model's own distribution, what RL trains on. */
  tokensTemperature: 1,
  topP: 1,
  /** vLLM's name of the tool-call format read from generated text in token mode. */
  toolParser: 'hermes',
} as const;

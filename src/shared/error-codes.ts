/**
 * Every error code of the toolkit, once: what it means, how the command line exits on it, whether
 * retrying the same call can succeed, and the groups other parts read (a store failure stops a run
 * resumably; an invalid action counts in a benchmark's invalid-action rate; the Python client's
 * exception class). The errors page (docs/reference/errors.md) and the Python client's mapping
 * (clients/python/agentic_rl/_codes.py) are generated from this table (`npm run docs:errors`), and
 * a test fails when either is not what it gives.
 */

export interface ErrorCodeInfo {
  /** What happened, in a sentence. */
  readonly meaning: string;
  /** How `agent` exits when a command fails with it: 2 (the input or the environment: one line and a hint), 1 (a bug: a stack to report). */
  readonly exit: 1 | 2;
  /** Whether the same call, tried again, can succeed (a tool's router retries only these). */
  readonly retryable: boolean;
  /** The store itself failed: a run stops on it, resumable, instead of failing one step. */
  readonly store?: true;
  /** The policy's action was refused before anything ran (a benchmark counts these in its invalid-action rate). */
  readonly invalidAction?: true;
  /** Thrown by a policy, it ends the episode with this reason (truncated), not as the policy's failure. */
  readonly endReason?: 'context_limit';
  /** An episode that failed with it stops its run from starting more: what every episode needs is down (the episodes in flight fail with it). */
  readonly stopsRun?: true;
  /** The Python client's exception for it (`agentic_rl.errors`); others are `AgentRLError`. */
  readonly python?: 'InvalidAction' | 'EpisodeOver' | 'CapacityReached' | 'UnknownEpisode' | 'EpisodeExists';
}

/** Every error code with its meaning, its exit code on the command line, whether a retry can help, and its groups. */
export const ERROR_CODES = {
  BAD_USAGE: { meaning: 'An option, argument or call that cannot work as given; the message says which, the hint what to pass.', exit: 2, retryable: false },
  DEFINITION_INVALID: { meaning: "An env's definition (schemas, manifest, tools module, judge) is invalid; each issue names its file and JSON pointer.", exit: 2, retryable: false },
  DEFINITION_NOT_FOUND: { meaning: 'No env folder (or schema file) where one was named, and no shipped env of that name.', exit: 2, retryable: false },
  PARAMS_INVALID: { meaning: "An action's params break its parameter schema; each issue names the field's JSON pointer. Nothing was dispatched.", exit: 2, retryable: false, invalidAction: true, python: 'InvalidAction' },
  STATE_INVALID: { meaning: 'A state (an initial state, or one a patch would make) breaks the state schema; nothing was written.', exit: 2, retryable: false },
  REWARD_INVALID: { meaning: "A reward breaks its source's schema (a value out of range, of the wrong type, an unknown source).", exit: 2, retryable: false },
  ACTION_UNKNOWN: { meaning: 'The env has no action of that name.', exit: 2, retryable: false, invalidAction: true, python: 'InvalidAction' },
  ACTION_WRONG_ACTOR: { meaning: "The action belongs to the env's other side: a user's action called as the agent's (or the other way round).", exit: 2, retryable: false, invalidAction: true, python: 'InvalidAction' },
  ACTION_DISABLED: { meaning: "The action's `enabled_if` is false in the current state.", exit: 2, retryable: false, invalidAction: true, python: 'InvalidAction' },
  ACTION_UNSATISFIABLE: { meaning: "No params can satisfy the action's parameter schema, so it can never be called.", exit: 2, retryable: false, invalidAction: true },
  ILLEGAL_TRANSITION: { meaning: "A lifecycle call the instance's status does not allow (resume of a running instance, step of a terminated one); the message says what is allowed.", exit: 1, retryable: false },
  EPISODE_DONE: { meaning: 'The episode is over (done, truncated or ended), or not started: reset first.', exit: 1, retryable: false, python: 'EpisodeOver' },
  TRACE_UNKNOWN: { meaning: 'No call of that trace id is pending on the instance (never dispatched, or resolved already).', exit: 1, retryable: false, python: 'UnknownEpisode' },
  TOOL_FAILED: { meaning: 'The tool reported a failure (it threw a ToolError, exited with an error, answered an HTTP error or an MCP isError).', exit: 1, retryable: true },
  SANDBOX_UNAVAILABLE: { meaning: 'A sandboxed command cannot run here: bubblewrap (`bwrap`) is not installed, or it cannot create namespaces; nothing ran unsandboxed.', exit: 2, retryable: false },
  TOOL_CRASHED: { meaning: 'The tool threw something that is not a ToolError, or its process died.', exit: 1, retryable: true },
  TOOL_TIMEOUT: { meaning: "The call ran past its tool's `timeout_ms`; it was cancelled.", exit: 1, retryable: true },
  TOOL_MALFORMED_OUTPUT: { meaning: 'A subprocess or HTTP tool answered something that is not a JSON tool result.', exit: 1, retryable: false },
  TOOL_OUTPUT_TOO_LARGE: { meaning: "A subprocess or HTTP tool wrote more than its `max_output_bytes`.", exit: 1, retryable: false },
  TOOL_CONTRACT: { meaning: 'What the tool returned is not JSON the log can keep, or breaks its declared output schema; the JSON pointer names the value.', exit: 1, retryable: false },
  TOOL_CIRCUIT_OPEN: { meaning: "The tool's circuit breaker is open after repeated failures: calls fail at once until it half-opens.", exit: 1, retryable: true },
  TOOL_CANCELLED: { meaning: 'The call was cancelled: its episode was reset or terminated, or the env closed.', exit: 1, retryable: false },
  TOOL_NOT_FOUND: { meaning: "The action's tool binding names a handler, command, URL or MCP tool that is not there.", exit: 2, retryable: false },
  TOOL_LOST: { meaning: 'The call was in flight when the run\'s process stopped; its tool is not idempotent, so the resume did not run it again.', exit: 1, retryable: false },
  STATE_SEQ_TRIMMED: { meaning: "The seq asked for was trimmed from the store's history (see the run folder's archive).", exit: 1, retryable: false },
  STATE_SEQ_UNKNOWN: { meaning: 'No state of that seq (or time) in the history: before its start or past its head.', exit: 2, retryable: false },
  STATE_CORRUPT: { meaning: 'Stored data is damaged: a hole in a history, a journal entry of another shape. Names the key or file and the seq.', exit: 2, retryable: false, store: true },
  STORE_UNAVAILABLE: { meaning: 'The Redis store could not be reached (for longer than `--store-wait`), or refused a write. The run stops, resumable.', exit: 2, retryable: true, store: true },
  STORE_WRITES_LOST: { meaning: 'Redis lost writes it had acknowledged (restarted without them on disk); the run stops, and a resume continues from what was kept.', exit: 2, retryable: false, store: true },
  LEASE_LOST: { meaning: "A distributed worker's lease on an episode passed to another worker: its writes are refused (fenced).", exit: 1, retryable: false },
  WORKER_LOST: { meaning: 'An episode whose worker died every time it ran it: not retried further.', exit: 1, retryable: false },
  ENV_MISMATCH: { meaning: "A worker's env is not the one the run was started with (another fingerprint): it refuses the run's episodes.", exit: 2, retryable: false },
  FOLDER_LOCKED: { meaning: "Another process holds the run folder's lock (`<run>/.lock`).", exit: 2, retryable: true },
  RECORD_INVALID: { meaning: "A run folder's record is not what its schema says (a hand-edited or damaged file); names the file and line.", exit: 2, retryable: false },
  CAPACITY_REACHED: { meaning: '`agent serve`: every session is taken (`--max-sessions`).', exit: 1, retryable: true, python: 'CapacityReached' },
  UNKNOWN_EPISODE: { meaning: "`agent serve`: no episode of that id in the caller's sessions (never opened, another client's, or ended and gone).", exit: 1, retryable: false, python: 'UnknownEpisode' },
  EPISODE_EXISTS: { meaning: '`agent serve`: a reset named an episode id that is already taken on this server.', exit: 1, retryable: false, python: 'EpisodeExists' },
  LLM_INCOMPATIBLE: { meaning: "The inference server cannot do token-in, token-out generation: a route (`/tokenize`, `/v1/completions`) or a field of its answers (`tokens`, `token_ids`, `logprobs`) is missing; the message names which. Checked before the first episode.", exit: 2, retryable: false },
  LLM_UNAVAILABLE: { meaning: 'The inference server could not be reached, or failed a request after the retries: the episode in flight fails with the reason (at start: nothing runs).', exit: 2, retryable: true, stopsRun: true },
  CONTEXT_LIMIT: { meaning: "An llm: episode's next prompt (with room for `max_tokens`) would not fit the model's context (`max_model_len`, or `--max-context`): the episode ends truncated, reason context_limit.", exit: 1, retryable: false, endReason: 'context_limit' },
  POLICY_FAILED: { meaning: 'The policy threw, or answered something that is not an action.', exit: 1, retryable: false },
  INTERRUPTED: { meaning: 'Stopped by a signal (Ctrl-C) or a server shutting down before the work was done.', exit: 1, retryable: false },
  INTERNAL: { meaning: 'A bug in the toolkit: the command line prints its stack; please report it with the command you ran.', exit: 1, retryable: false },
} as const satisfies Readonly<Record<string, ErrorCodeInfo>>;

/** Every code a toolkit error carries; `ERROR_CODES` says what each means and whether it is retryable. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** What the table says of a code; undefined for a code that is not in it (an error of another version). */
export function codeInfo(code: string): ErrorCodeInfo | undefined {
  return Object.hasOwn(ERROR_CODES, code) ? (ERROR_CODES as Readonly<Record<string, ErrorCodeInfo>>)[code] : undefined;
}

/** The codes of one group of the table (`store`, `invalidAction`, `stopsRun`), as a set. */
export function codesWhere(flag: 'store' | 'invalidAction' | 'stopsRun'): ReadonlySet<ErrorCode> {
  return new Set((Object.entries(ERROR_CODES) as [ErrorCode, ErrorCodeInfo][]).filter(([, info]) => info[flag] === true).map(([code]) => code));
}

/**
 * Builds one tool's resilience stack from its declared policy:
 *   bulkhead → retry (retryable errors only, exponential backoff with jitter) → circuit breaker → timeout → attempt
 * Bulkhead, retry and breaker are cockatiel's. The per-attempt timeout is ours: cockatiel's
 * derives and aborts an AbortController on every call, which cost more than the rest of a
 * no-op step together (see bench/). Here the attempt's signal is created only if the handler
 * reads it, and every attempt of a tool shares one timer (timed-attempt.ts, shared/deadlines.ts).
 * The timeout is aggressive: a handler that ignores its signal still times out (its late result
 * is dropped). Failures come out as ToolErrors with a stable code.
 */
import {
  bulkhead,
  circuitBreaker,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleWhen,
  isBrokenCircuitError,
  isBulkheadRejectedError,
  retry,
  wrap,
  type IPolicy,
} from 'cockatiel';
import { isAgentError, ToolError, describeError } from '../shared/errors.js';
import { DeadlineQueue } from '../shared/deadlines.js';
import type { ToolPolicy } from '../schema/definition.js';
import { TimedAttempt, type LiveControllers } from './timed-attempt.js';

export type { LiveControllers } from './timed-attempt.js';

/** Gives the attempt its AbortSignal on demand. */
export type SignalSource = () => AbortSignal;

export interface PolicyStack {
  /**
   * Runs `attempt` under the policies, each attempt under the timeout. `signal` is the call's;
   * whoever aborts it must also abort the controllers in `live` (the attempts in flight).
   */
  execute<T>(attempt: (signal: SignalSource) => Promise<T>, signal: AbortSignal, live?: LiveControllers): Promise<T>;
  /** Runs `attempt` under bulkhead, retry and breaker only: the attempt applies the timeout itself ({@link TimedAttempt}). */
  layered<T>(attempt: () => Promise<T>, signal: AbortSignal): Promise<T>;
  /** No bulkhead, retry or breaker: an attempt needs no policy but its timeout (the router's fast path). */
  readonly plain: boolean;
  /** The timeout's queue; undefined when the tool has no timeout. */
  readonly deadlines: DeadlineQueue | undefined;
  readonly timeoutError: () => Error;
  /** A failure as the ToolError callers match on. */
  classify(err: unknown, signal: AbortSignal): unknown;
}

function isRetryable(err: unknown): boolean {
  return isAgentError(err) && err.retryable;
}

function timeoutError(tool: string, policy: ToolPolicy): ToolError {
  return new ToolError('TOOL_TIMEOUT', tool, `timed out after ${policy.timeoutMs} ms per attempt`, {
    retryable: true,
    hint: 'Raise timeout_ms for this tool in env.json, or make the tool faster.',
  });
}

/** An attempt whose outcome is a promise: what cockatiel's layers wrap. */
class PromisedAttempt<T> extends TimedAttempt {
  readonly #attempt: (signal: SignalSource) => Promise<T>;
  readonly #resolve: (value: T) => void;
  readonly #reject: (err: unknown) => void;

  constructor(
    parent: AbortSignal,
    live: LiveControllers | undefined,
    deadlines: DeadlineQueue | undefined,
    onTimeout: () => Error,
    attempt: (signal: SignalSource) => Promise<T>,
    resolve: (value: T) => void,
    reject: (err: unknown) => void,
  ) {
    super(parent, live, deadlines, onTimeout);
    this.#attempt = attempt;
    this.#resolve = resolve;
    this.#reject = reject;
    this.start();
  }

  protected invoke(): unknown {
    return this.#attempt(() => this.attemptSignal());
  }

  protected settle(ok: boolean, value: unknown): void {
    // A worker or a child process rejects with the abort reason, which is the timeout error itself.
    if (ok) this.#resolve(value as T);
    else this.#reject(value);
  }
}

export function buildPolicyStack(tool: string, policy: ToolPolicy): PolicyStack {
  const layers: IPolicy[] = [];
  if (policy.concurrency !== undefined) layers.push(bulkhead(policy.concurrency, policy.queue ?? Number.MAX_SAFE_INTEGER));
  if (policy.retry && policy.retry.maxAttempts > 1) {
    layers.push(
      retry(handleWhen(isRetryable), {
        maxAttempts: policy.retry.maxAttempts - 1,
        backoff: new ExponentialBackoff({ initialDelay: policy.retry.initialDelayMs, maxDelay: policy.retry.maxDelayMs }),
      }),
    );
  }
  if (policy.circuitBreaker) {
    layers.push(
      circuitBreaker(
        handleWhen((err) => !safely(() => isBrokenCircuitError(err))),
        { halfOpenAfter: policy.circuitBreaker.halfOpenAfterMs, breaker: new ConsecutiveBreaker(policy.circuitBreaker.failures) },
      ),
    );
  }
  const stack = layers.length === 0 ? undefined : layers.length === 1 ? layers[0] : wrap(...(layers as [IPolicy, ...IPolicy[]]));
  const onTimeout = (): Error => timeoutError(tool, policy);
  const deadlines = policy.timeoutMs === undefined ? undefined : new DeadlineQueue(policy.timeoutMs);
  const classifyHere = (err: unknown, signal: AbortSignal): unknown => classify(tool, policy, err, signal);

  const layered = async <T>(attempt: () => Promise<T>, signal: AbortSignal): Promise<T> => {
    try {
      if (!stack) return await attempt();
      return (await stack.execute(attempt, signal)) as T;
    } catch (err) {
      throw classifyHere(err, signal);
    }
  };
  return {
    plain: stack === undefined,
    deadlines,
    timeoutError: onTimeout,
    classify: classifyHere,
    layered,
    execute<T>(attempt: (signal: SignalSource) => Promise<T>, signal: AbortSignal, live?: LiveControllers): Promise<T> {
      return layered(() => new Promise<T>((resolve, reject) => void new PromisedAttempt<T>(signal, live, deadlines, onTimeout, attempt, resolve, reject)), signal);
    },
  };
}

function safely(test: () => boolean): boolean {
  try {
    return test();
  } catch {
    return false;
  }
}

/** Map policy and handler failures to ToolErrors the caller can match on. */
function classify(tool: string, policy: ToolPolicy, err: unknown, signal: AbortSignal): unknown {
  if (signal.aborted) {
    return new ToolError('TOOL_CANCELLED', tool, `cancelled: ${describeError(signal.reason)}`, { cause: signal.reason });
  }
  // cockatiel's guards read properties of the error: a hostile thrown value (a Proxy whose traps
  // throw) must not get past classification as a raw exception.
  if (safely(() => isBrokenCircuitError(err))) {
    return new ToolError('TOOL_CIRCUIT_OPEN', tool, `circuit open after ${policy.circuitBreaker?.failures} consecutive failures; calls are refused until a probe succeeds`, {
      hint: `The tool keeps failing; a probe call is let through after ${policy.circuitBreaker?.halfOpenAfterMs} ms.`,
    });
  }
  if (safely(() => isBulkheadRejectedError(err))) {
    return new ToolError('TOOL_FAILED', tool, `rejected: ${policy.concurrency} calls running and the queue of ${policy.queue} is full`, { retryable: true });
  }
  if (isAgentError(err)) return err;
  return new ToolError('TOOL_CRASHED', tool, `threw ${describeError(err)}`, {
    cause: err,
    hint: 'Throw a ToolError (with retryable set) for expected failures; anything else is reported as an untyped crash.',
  });
}

/**
 * Builds one tool's resilience stack from its declared policy:
 *   bulkhead → retry (retryable errors only, exponential backoff with jitter) → circuit breaker → timeout → attempt
 * Bulkhead, retry and breaker are cockatiel's. The per-attempt timeout is ours: cockatiel's
 * derives and aborts an AbortController on every call, which cost more than the rest of a
 * no-op step together (see bench/). Here the attempt's signal is created only if the handler
 * reads it, so a call that never looks at its signal costs one timer.
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
import type { ToolPolicy } from '../schema/definition.js';

/** Gives the attempt its AbortSignal on demand. */
export type SignalSource = () => AbortSignal;

export interface PolicyStack {
  /**
   * Runs `attempt` under the policies. `signal` is the call's; whoever aborts it must also abort
   * the controllers in `live` (the attempts in flight).
   */
  execute<T>(attempt: (signal: SignalSource) => Promise<T>, signal: AbortSignal, live?: LiveControllers): Promise<T>;
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

/**
 * Where the controllers of attempts in flight are kept, so that cancelling the call aborts them.
 * A plain Set, not a listener on the call's signal: hanging a listener per attempt off a
 * long-lived signal costs more in garbage collection than the rest of the attempt (bench/).
 */
export type LiveControllers = Set<AbortController>;

/**
 * One attempt under a deadline. The attempt's signal aborts on timeout or when the call is
 * cancelled (its controller sits in `live` meanwhile); it is created only when the attempt asks.
 */
function attemptWithTimeout<T>(attempt: (signal: SignalSource) => Promise<T>, parent: AbortSignal, live: LiveControllers | undefined, ms: number | undefined, onTimeout: () => Error): Promise<T> {
  let controller: AbortController | undefined;
  let expired: Error | undefined;
  const unlink = (): void => {
    if (controller) live?.delete(controller);
  };
  const source: SignalSource = () => {
    if (!controller) {
      controller = new AbortController();
      if (expired) controller.abort(expired);
      else if (parent.aborted) controller.abort(parent.reason);
      else live?.add(controller);
    }
    return controller.signal;
  };
  if (ms === undefined) return attempt(source).finally(unlink);
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      expired = onTimeout();
      controller?.abort(expired);
      unlink();
      reject(expired);
    }, ms);
    attempt(source).then(
      (v) => {
        clearTimeout(timer);
        unlink();
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        unlink();
        // A worker or a child process rejects with the abort reason, which is the timeout error itself.
        reject(err);
      },
    );
  });
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

  return {
    async execute<T>(attempt: (signal: SignalSource) => Promise<T>, signal: AbortSignal, live?: LiveControllers): Promise<T> {
      const once = (): Promise<T> => attemptWithTimeout(attempt, signal, live, policy.timeoutMs, onTimeout);
      try {
        if (!stack) return await once();
        return (await stack.execute(once, signal)) as T;
      } catch (err) {
        throw classify(tool, policy, err, signal);
      }
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

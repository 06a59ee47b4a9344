/**
 * Builds one tool's resilience stack from its declared policy, with cockatiel:
 *   bulkhead → retry (retryable errors only, exponential backoff with jitter) → circuit breaker → timeout → attempt
 * The timeout is per attempt and aggressive: a handler that ignores its AbortSignal still times
 * out (its late result is dropped). Failures come out as ToolErrors with a stable code.
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
  timeout,
  TimeoutStrategy,
  wrap,
  type IPolicy,
} from 'cockatiel';
import { isAgentError, ToolError } from '../shared/errors.js';
import type { ToolPolicy } from '../schema/definition.js';

export interface PolicyStack {
  /** Runs `attempt` under the policies; `attempt` receives the per-attempt signal. */
  execute<T>(attempt: (signal: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T>;
}

/**
 * cockatiel 3.2.1's own `isTaskCancelledError` tests the wrong brand property (it checks
 * 'isBulkheadRejectedError'), so timeouts would pass as untyped errors; test the right one.
 */
function isTaskCancelledError(err: unknown): boolean {
  return err instanceof Error && (err as { isTaskCancelledError?: unknown }).isTaskCancelledError === true;
}

function isRetryable(err: unknown): boolean {
  return isTaskCancelledError(err) || (isAgentError(err) && err.retryable);
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
        handleWhen((err) => !isBrokenCircuitError(err)),
        { halfOpenAfter: policy.circuitBreaker.halfOpenAfterMs, breaker: new ConsecutiveBreaker(policy.circuitBreaker.failures) },
      ),
    );
  }
  if (policy.timeoutMs !== undefined) layers.push(timeout(policy.timeoutMs, { strategy: TimeoutStrategy.Aggressive, abortOnReturn: true }));
  const stack = layers.length === 0 ? undefined : layers.length === 1 ? layers[0] : wrap(...(layers as [IPolicy, ...IPolicy[]]));

  return {
    async execute<T>(attempt: (signal: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> {
      // An attempt whose own signal fired while the call's did not was cut by the timeout,
      // whatever the executor rejected with (a worker or a child process rejects with the abort reason).
      const guarded = (inner: AbortSignal): Promise<T> =>
        attempt(inner).catch((err: unknown) => {
          throw inner.aborted && !signal.aborted ? timeoutError(tool, policy) : err;
        });
      try {
        if (!stack) return await guarded(signal);
        return (await stack.execute((ctx: { signal: AbortSignal }) => guarded(ctx.signal), signal)) as T;
      } catch (err) {
        throw classify(tool, policy, err, signal);
      }
    },
  };
}

function timeoutError(tool: string, policy: ToolPolicy): ToolError {
  return new ToolError('TOOL_TIMEOUT', tool, `timed out after ${policy.timeoutMs} ms per attempt`, {
    retryable: true,
    hint: 'Raise timeout_ms for this tool in env.json, or make the tool faster.',
  });
}

/** Map policy and handler failures to ToolErrors the caller can match on. */
function classify(tool: string, policy: ToolPolicy, err: unknown, signal: AbortSignal): unknown {
  if (signal.aborted) {
    return new ToolError('TOOL_CANCELLED', tool, `cancelled: ${String((signal.reason as Error | undefined)?.message ?? signal.reason)}`, { cause: signal.reason });
  }
  if (isTaskCancelledError(err)) return timeoutError(tool, policy);
  if (isBrokenCircuitError(err)) {
    return new ToolError('TOOL_CIRCUIT_OPEN', tool, `circuit open after ${policy.circuitBreaker?.failures} consecutive failures; calls are refused until a probe succeeds`, {
      hint: `The tool keeps failing; a probe call is let through after ${policy.circuitBreaker?.halfOpenAfterMs} ms.`,
    });
  }
  if (isBulkheadRejectedError(err)) {
    return new ToolError('TOOL_FAILED', tool, `rejected: ${policy.concurrency} calls running and the queue of ${policy.queue} is full`, { retryable: true });
  }
  if (isAgentError(err)) return err;
  const e = err as Error;
  return new ToolError('TOOL_FAILED', tool, `threw ${e?.name ?? 'a non-Error'}: ${e?.message ?? String(err)}`, {
    cause: err,
    hint: 'Throw a ToolError (with retryable set) for expected failures; anything else is reported as an untyped crash.',
  });
}

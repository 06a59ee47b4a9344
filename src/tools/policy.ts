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
  isTaskCancelledError,
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

function isRetryable(err: unknown): boolean {
  if (isTaskCancelledError(err)) return true; // a timed-out attempt
  return isAgentError(err) && err.retryable;
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
      try {
        if (!stack) return await attempt(signal);
        return (await stack.execute((ctx: { signal: AbortSignal }) => attempt(ctx.signal), signal)) as T;
      } catch (err) {
        throw classify(tool, policy, err, signal);
      }
    },
  };
}

/** Map policy and handler failures to ToolErrors the caller can match on. */
function classify(tool: string, policy: ToolPolicy, err: unknown, signal: AbortSignal): unknown {
  if (signal.aborted) {
    return new ToolError('TOOL_CANCELLED', tool, `cancelled: ${String((signal.reason as Error | undefined)?.message ?? signal.reason)}`, { cause: signal.reason });
  }
  if (isTaskCancelledError(err)) {
    return new ToolError('TOOL_TIMEOUT', tool, `timed out after ${policy.timeoutMs} ms${policy.retry ? ` (on every one of ${policy.retry.maxAttempts} attempts)` : ''}`, {
      retryable: true,
      hint: 'Raise timeout_ms for this tool in env.json, or make the tool faster.',
    });
  }
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

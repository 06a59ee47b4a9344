/**
 * Whether an OpenAI-compatible server answers at all, asked once before a run's first episode: an
 * endpoint that refuses connections (a wrong port, a server not started) is one clear error naming
 * its URL, instead of every episode failing on "Connection error.". Any HTTP answer counts as
 * reachable (some servers have no `/models`, or want a key for it).
 */
import { AgentError, describeError } from '../shared/errors.js';

export async function assertReachable(baseURL: string, signal?: AbortSignal, timeoutMs = 10_000): Promise<void> {
  const url = `${baseURL.replace(/\/+$/, '')}/models`;
  const deadline = AbortSignal.timeout(timeoutMs);
  try {
    const res = await fetch(url, { signal: signal ? AbortSignal.any([signal, deadline]) : deadline });
    await res.body?.cancel();
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    const cause = err instanceof Error && err.cause !== undefined ? err.cause : err;
    throw new AgentError('LLM_UNAVAILABLE', `cannot reach the inference server at ${baseURL} (GET ${url}: ${deadline.aborted ? `no answer in ${timeoutMs / 1000} s` : describeError(cause)})`, {
      hint: `Is it up, and is --llm-base-url right (scheme, host, port, /v1)? Try: curl ${url}. Nothing ran.`,
    });
  }
}

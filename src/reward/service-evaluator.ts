/**
 * A reward source served over HTTP (evaluation as a service): each judgement — the step's states,
 * action, params, observation (and the trajectory, for an episode-scoped source) — is POSTed as
 * JSON to the service, which answers a number, a boolean or `{"value": …}`. The ledger checks the
 * value against the source's schema like any other. Runs under the source's timeout, retry and
 * circuit breaker: a network failure, a 5xx or a 429 is retried; another 4xx is the request's fault
 * and is not. `agent benchmark --metric <url>` asks a metric service the same way.
 */
import { AgentError, describeError } from '../shared/errors.js';
import { isPlainObject } from '../shared/json.js';

/** An answer is a score, not a document: past this it is refused. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** POST one judgement (`body`: the source's name and its RewardInput) to the service; its value. */
export async function askService(url: string, tokenEnv: string | undefined, name: string, body: { readonly source: string; readonly trace_id: string }, signal: AbortSignal): Promise<number | boolean> {
  const who = `reward service '${name}'`;
  return valueOf(await postJson(url, body, { who, ...(tokenEnv !== undefined ? { tokenEnv } : {}), traceId: body.trace_id }, signal), who);
}

/**
 * POST a JSON body to an evaluator service and read its JSON answer. A network failure, a 5xx or a
 * 429 is a retryable error (the service's trouble, which may pass); another 4xx is not.
 */
export async function postJson(url: string, body: unknown, o: { readonly who: string; readonly tokenEnv?: string; readonly traceId?: string }, signal: AbortSignal): Promise<unknown> {
  const token = o.tokenEnv === undefined ? undefined : process.env[o.tokenEnv];
  if (o.tokenEnv !== undefined && !token) throw new AgentError('DEFINITION_INVALID', `${o.who} needs a token in $${o.tokenEnv}, which is not set`, { hint: `Set ${o.tokenEnv} to the service's bearer token.` });
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...(o.traceId ? { 'x-trace-id': o.traceId } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw new AgentError('TOOL_FAILED', `${o.who}: POST ${url} failed: ${describeError(err)}`, { cause: err, retryable: true });
  }
  const text = await response.text();
  if (!response.ok) {
    throw new AgentError('TOOL_FAILED', `${o.who}: POST ${url} answered ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`, { retryable: response.status >= 500 || response.status === 429 });
  }
  if (text.length > MAX_ANSWER_BYTES) throw new AgentError('TOOL_OUTPUT_TOO_LARGE', `${o.who}: the answer of ${url} is over ${MAX_ANSWER_BYTES} bytes`);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new AgentError('TOOL_CONTRACT', `${o.who} answered ${JSON.stringify(text.slice(0, 80))}, which is not JSON`, { hint: 'Answer JSON: a number, a boolean or {"value": number}.' });
  }
}

function valueOf(answer: unknown, who: string): number | boolean {
  const value = isPlainObject(answer) ? answer['value'] : answer;
  if (typeof value !== 'number' && typeof value !== 'boolean') {
    throw new AgentError('TOOL_CONTRACT', `${who} answered ${JSON.stringify(answer).slice(0, 80)}: /value must be a number or a boolean`, { hint: 'Answer a number, a boolean or {"value": number}.' });
  }
  return value;
}

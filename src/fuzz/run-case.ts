/**
 * Runs one fuzz case against an env and judges it with the checks. The env is shared between
 * cases; each case gets its own agent instance, reset to the case's state.
 */
import type { AgentEnv } from '../env/agent-env.js';
import type { EnvEvent } from '../events/env-events.js';
import { describeError, isAgentError, ValidationError } from '../shared/errors.js';
import type { CheckName, Failure, FuzzCase } from './case.js';

export interface CaseResult {
  readonly failure?: Failure;
  /** A digest of what happened, compared between runs of the same case. */
  readonly fingerprint: string;
  readonly toolInvoked: boolean;
}

export async function runCase(env: AgentEnv, c: FuzzCase, enabled: ReadonlySet<CheckName>, caseTimeoutMs: number): Promise<CaseResult> {
  // The instance id seeds each trace's ctx.rng, so it comes from the case: a rerun draws the same numbers.
  const agent = env.createInstance({ id: `case-${c.id.replace(/[^A-Za-z0-9_.#-]/g, '_')}` });
  const events: EnvEvent[] = [];
  const off = env.events.onAny((e) => {
    if (e.instance_id === agent.id) events.push(e);
  });
  const fail = (check: CheckName, code: string, message: string): CaseResult | undefined =>
    enabled.has(check) ? { failure: { check, code, message }, fingerprint: `${check}:${code}`, toolInvoked: events.some((e) => e.type === 'tool_started') } : undefined;
  try {
    await agent.reset(c.state);
    let traceId: string;
    try {
      traceId = agent.dispatch({ name: c.action, params: c.params });
    } catch (err) {
      const code = isAgentError(err) ? err.code : 'UNTYPED';
      if (c.kind === 'disabled') return code === 'ACTION_DISABLED' ? ok(`refused:${code}`) : (fail('refuses-disabled', code, `a disabled call failed with ${code} instead of ACTION_DISABLED`) ?? ok(code));
      if (c.kind === 'invalid' || c.kind === 'boundary-outside') {
        const pointers = err instanceof ValidationError ? err.issues.map((i) => i.pointer) : [];
        const named = c.pointer === undefined || pointers.some((p) => p === c.pointer || p.startsWith(`${c.pointer}/`) || c.pointer?.startsWith(`${p}/`) || (p === '' && c.pointer === ''));
        if (code !== 'PARAMS_INVALID') return fail('rejects-invalid', code, `an invalid call (${c.mutation ?? c.kind} at ${c.pointer}) failed with ${code}, not PARAMS_INVALID`) ?? ok(code);
        if (!named) return fail('rejects-invalid', 'WRONG_POINTER', `the call was rejected, but the error names ${pointers.join(', ') || 'no field'} instead of ${c.pointer}`) ?? ok(code);
        return ok(`rejected:${c.pointer}`);
      }
      return fail('accepts-valid', code, `a valid, enabled call was refused: ${describeError(err).split('\n')[0]}`) ?? ok(code);
    }
    if (c.kind === 'disabled') return fail('refuses-disabled', 'ACCEPTED', 'a call whose enabled_if is false in this state was accepted') ?? ok('accepted');
    if (c.kind === 'invalid' || c.kind === 'boundary-outside') return fail('rejects-invalid', 'ACCEPTED', `an invalid call (${c.mutation ?? c.kind} at ${c.pointer}) was accepted and dispatched`) ?? ok('accepted');
    const result = await agent.resolve(traceId, { timeoutMs: caseTimeoutMs });
    const blocked = events.find((e) => e.type === 'loop_blocked');
    if (blocked?.type === 'loop_blocked') {
      const f = fail('no-loop-block', 'LOOP_BLOCKED', `the handler held the event loop for ${Math.round(blocked.blocked_ms)} ms`);
      if (f) return f;
    }
    if (result.info.status === 'timeout') return fail('no-timeout', 'OUTLIVED_TIMEOUT', `the call was still running ${caseTimeoutMs} ms after dispatch, past its timeout`) ?? ok('timeout');
    const error = result.info.error;
    if (error) {
      const check: CheckName | undefined =
        error.code === 'TOOL_CRASHED' ? 'no-crash' : error.code === 'TOOL_TIMEOUT' ? 'no-timeout' : error.code === 'STATE_INVALID' ? 'state-valid' : error.code === 'TOOL_CONTRACT' || error.code === 'TOOL_MALFORMED_OUTPUT' ? 'result-contract' : undefined;
      // A typed failure of the tool's own (TOOL_FAILED: "no such user") is a legitimate answer.
      if (check) return fail(check, error.code, error.message.split('\n').slice(0, 3).join(' ')) ?? ok(error.code);
      return ok(`failed:${error.code}`);
    }
    return ok(`resolved:${JSON.stringify(result.observation ?? null).slice(0, 200)}`);
  } finally {
    off();
    if (agent.status !== 'terminated' && agent.status !== 'archived') await agent.terminate('case over');
    env.release(agent.id);
  }

  function ok(fingerprint: string): CaseResult {
    return { fingerprint, toolInvoked: events.some((e) => e.type === 'tool_started') };
  }
}

/**
 * The agent-instance state machine:
 *
 *   created → initialized → running ⇄ paused
 *                  ↑___________|  (reset starts a new episode from running or paused)
 *   any live state → terminated → archived
 *
 * An illegal transition is refused with ILLEGAL_TRANSITION, naming what is allowed from here.
 */
import { AgentError } from '../shared/errors.js';

/** Where an instance is in its lifecycle: created → initialized → running ⇄ paused → terminated → archived. */
export type LifecycleStatus = 'created' | 'initialized' | 'running' | 'paused' | 'terminated' | 'archived';

const TRANSITIONS: Readonly<Record<LifecycleStatus, readonly LifecycleStatus[]>> = {
  created: ['initialized', 'terminated'],
  initialized: ['initialized', 'running', 'paused', 'terminated'],
  running: ['initialized', 'paused', 'terminated'],
  paused: ['initialized', 'running', 'terminated'],
  terminated: ['archived'],
  archived: [],
};

const VERB: Readonly<Record<LifecycleStatus, string>> = {
  created: 'create',
  initialized: 'reset()',
  running: 'dispatch() or resume()',
  paused: 'pause()',
  terminated: 'terminate()',
  archived: 'archive()',
};

export function canTransition(from: LifecycleStatus, to: LifecycleStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

export function assertTransition(instanceId: string, from: LifecycleStatus, to: LifecycleStatus): void {
  if (canTransition(from, to)) return;
  const allowed = TRANSITIONS[from];
  throw new AgentError('ILLEGAL_TRANSITION', `instance '${instanceId}' is ${from}: it cannot become ${to}`, {
    hint: allowed.length === 0 ? `An ${from} instance is final.` : `From ${from}, allowed: ${allowed.map((s) => `${s} (${VERB[s]})`).join(', ')}.`,
  });
}

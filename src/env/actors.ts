/** Which side of an episode may make a call: the agent, or in an env with two sides (τ²-bench telecom) the user. */
import type { ActionDefinition } from '../schema/definition.js';
import { AgentError } from '../shared/errors.js';
import type { Action } from './instance-types.js';

/** Throws `ACTION_WRONG_ACTOR` when the action is the other side's (nothing is dispatched). */
export function refuseWrongActor(def: ActionDefinition, action: Action): void {
  const actor = action.actor ?? 'agent';
  if ((def.actor ?? 'agent') === actor) return;
  throw new AgentError('ACTION_WRONG_ACTOR', `'${def.name}' is the ${def.actor === 'user' ? "user's" : "agent's"} action: the ${actor} cannot call it`, {
    hint: actor === 'agent' ? 'Ask the user to do it (a message), or choose among availableActions().' : "Choose among availableActions('user').",
  });
}

/**
 * An enabled action as the tool a model or a client is offered: one shape for every place that
 * lists an env's actions (served observations, `agent mcp-serve`, the `llm:` policy, token mode).
 */
import type { ToolSpec } from '../llm/client.js';
import type { AvailableAction } from './instance-types.js';

/** The action as a tool: its parameters always an object schema (an action declared with one schema may leave `type` out; a `true` schema takes any object). */
export function actionTool(action: AvailableAction): ToolSpec {
  return { name: action.name, ...(action.description !== undefined ? { description: action.description } : {}), parameters: typeof action.parameters === 'object' ? { type: 'object', ...action.parameters } : { type: 'object' } };
}

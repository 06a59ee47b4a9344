import type { JsonObject } from '../shared/json.js';
import type { ToolHandler } from './types.js';

/**
 * Declares a handler with typed params. The core validates params against the action's schema
 * before the handler runs, which is what makes the narrowing to `P` sound.
 *
 * @example
 * export const get_weather = defineTool<{ city: string }>(async ({ city }, ctx) => ({ observation: { city } }));
 */
export function defineTool<P>(handler: (params: P, ctx: Parameters<ToolHandler>[1]) => ReturnType<ToolHandler>): ToolHandler {
  return handler as unknown as (params: JsonObject, ctx: Parameters<ToolHandler>[1]) => ReturnType<ToolHandler>;
}

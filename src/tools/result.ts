/** Checks a tool's raw return value against the handler contract; a violation fails only that trace. */
import { ToolError } from '../shared/errors.js';
import { isPlainObject } from '../shared/json.js';
import type { PatchError } from '../state/patch.js';
import { assertPatch } from '../state/patch.js';
import type { ToolResult } from './types.js';

const KEYS = new Set(['observation', 'patch', 'rewards', 'done']);

export function checkToolResult(raw: unknown, tool: string): ToolResult {
  if (raw === undefined) return {};
  if (!isPlainObject(raw)) {
    throw new ToolError('TOOL_CONTRACT', tool, `returned ${Array.isArray(raw) ? 'an array' : typeof raw}, expected {observation, patch?, rewards?, done?}`, {
      hint: 'Return an object; put the data the agent should see under "observation".',
    });
  }
  for (const key of Object.keys(raw)) {
    if (!KEYS.has(key)) throw new ToolError('TOOL_CONTRACT', tool, `returned unknown key '${key}'`, { hint: 'A tool result has only observation, patch, rewards and done.' });
  }
  if (raw['patch'] !== undefined) {
    try {
      assertPatch(raw['patch']);
    } catch (err) {
      throw new ToolError('TOOL_CONTRACT', tool, `returned an invalid patch: ${(err as PatchError).message}`, { cause: err, hint: (err as PatchError).hint });
    }
  }
  const rewards = raw['rewards'];
  if (rewards !== undefined) {
    if (!isPlainObject(rewards)) throw new ToolError('TOOL_CONTRACT', tool, "'rewards' must be an object of source → number", {});
    for (const [k, v] of Object.entries(rewards)) {
      if (typeof v !== 'boolean' && (typeof v !== 'number' || !Number.isFinite(v))) {
        throw new ToolError('TOOL_CONTRACT', tool, `reward '${k}' is ${JSON.stringify(v)}, expected a finite number or a boolean`);
      }
    }
  }
  if (raw['done'] !== undefined && typeof raw['done'] !== 'boolean') throw new ToolError('TOOL_CONTRACT', tool, "'done' must be a boolean");
  return raw as ToolResult;
}

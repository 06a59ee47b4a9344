/** Checks a tool's raw return value against the handler contract; a violation fails only that trace. */
import { ToolError } from '../shared/errors.js';
import { isPlainObject, jsonCopy, type JsonValue, type NotJsonError } from '../shared/json.js';
import type { PatchError } from '../state/patch.js';
import { assertPatch } from '../state/patch.js';
import type { ToolResult } from './types.js';

const KEYS = new Set(['observation', 'patch', 'rewards', 'done']);
const ONCE = { remember: false } as const;

/**
 * The result is copied first (frozen plain JSON): the log keeps nothing the tool still holds, and
 * a value JSON cannot carry (a BigInt, a Date, a cycle, a throwing getter) fails this trace here,
 * as the tool's contract breach, instead of failing later in a writer or a validator.
 */
export function checkToolResult(value: unknown, tool: string): ToolResult {
  if (value === undefined) return {};
  let raw: JsonValue;
  try {
    raw = jsonCopy(value, ONCE);
  } catch (err) {
    const e = err as NotJsonError;
    throw new ToolError('TOOL_CONTRACT', tool, `returned a value that is not JSON at ${e.pointer === '' ? '(root)' : e.pointer}: ${e.reason}`, {
      hint: 'Return plain JSON: objects, arrays, strings, finite numbers, booleans and null (convert dates with toISOString()).',
    });
  }
  if (!isPlainObject(raw)) {
    throw new ToolError('TOOL_CONTRACT', tool, `returned ${Array.isArray(raw) ? 'an array' : typeof raw}, expected {observation, patch?, rewards?, done?}`, {
      hint: 'Return an object; put the data the agent should see under "observation".',
    });
  }
  for (const key in raw) {
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
    // `rewards` is part of the frozen plain copy above: its keys are all its own.
    for (const k in rewards) {
      const v = rewards[k];
      if (typeof v !== 'boolean' && (typeof v !== 'number' || !Number.isFinite(v))) {
        throw new ToolError('TOOL_CONTRACT', tool, `reward '${k}' is ${JSON.stringify(v)}, expected a finite number or a boolean`);
      }
    }
  }
  if (raw['done'] !== undefined && typeof raw['done'] !== 'boolean') throw new ToolError('TOOL_CONTRACT', tool, "'done' must be a boolean");
  return raw as ToolResult;
}

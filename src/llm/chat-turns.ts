/**
 * OpenAI's chat fine-tuning shape of a conversation: what `conversations.jsonl` of an `llm:` run
 * and `agent export --format chat` write, and what TRL, verl and OpenAI fine-tuning read. Tool-call
 * arguments are a JSON string, as OpenAI sends them; every tool turn names the call it answers.
 */
import { isPlainObject, type JsonObject } from '../shared/json.js';
import type { ChatMessage } from './client.js';

/** A tool call in an assistant turn, in OpenAI's chat format (`function.arguments` a JSON string). */
export interface ChatToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

/** One turn of a chat in OpenAI's format: system, user, assistant (text and tool calls) or tool (the answer to a call id). */
export type ChatTurn =
  | { readonly role: 'system' | 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly tool_calls?: readonly ChatToolCall[] }
  | { readonly role: 'tool'; readonly tool_call_id: string; readonly name: string; readonly content: string };

/** A model conversation as chat turns, the system prompt first; a tool turn is named after the call it answers. */
export function chatTurns(system: string, messages: readonly ChatMessage[]): ChatTurn[] {
  const names = new Map<string, string>();
  const turns: ChatTurn[] = system ? [{ role: 'system', content: system }] : [];
  for (const m of messages) {
    if (m.role === 'user') turns.push({ role: 'user', content: m.content });
    else if (m.role === 'tool') turns.push({ role: 'tool', tool_call_id: m.toolCallId, name: names.get(m.toolCallId) ?? '', content: m.content });
    else {
      const calls = (m.toolCalls ?? []).map((c): ChatToolCall => {
        names.set(c.id, c.name);
        return { id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } };
      });
      turns.push({ role: 'assistant', content: m.content, ...(calls.length > 0 ? { tool_calls: calls } : {}) });
    }
  }
  return turns;
}

/** Chat turns back as the messages a model client sends (the system turn, if any, left out: it goes apart). */
export function chatMessages(turns: readonly ChatTurn[]): ChatMessage[] {
  return turns.flatMap((t): ChatMessage[] => {
    if (t.role === 'system') return [];
    if (t.role === 'user') return [{ role: 'user', content: t.content }];
    if (t.role === 'tool') return [{ role: 'tool', toolCallId: t.tool_call_id, content: t.content }];
    if (t.role !== 'assistant') return [];
    const calls = (t.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: JSON.parse(c.function.arguments) as JsonObject }));
    return [{ role: 'assistant', content: t.content, ...(calls.length > 0 ? { toolCalls: calls } : {}) }];
  });
}

/**
 * Chat turns read from data (a task's `history`), each problem reported at its JSON pointer: user
 * and assistant turns (`content` a string; an assistant's may be null beside `tool_calls`), tool
 * turns answering a call made before them. Undefined when any turn is malformed.
 */
export function readChatTurns(raw: unknown, at: string, fail: (pointer: string, message: string) => void): ChatTurn[] | undefined {
  if (!Array.isArray(raw)) return void fail(at, 'must be an array of chat turns ({role, content}, OpenAI\'s chat shape)');
  const turns: ChatTurn[] = [];
  const calls = new Map<string, string>();
  let ok = true;
  const bad = (pointer: string, message: string): void => {
    ok = false;
    fail(pointer, message);
  };
  raw.forEach((t: unknown, i) => {
    const p = `${at}/${i}`;
    if (typeof t !== 'object' || t === null || Array.isArray(t)) return bad(p, 'must be an object {role, content}');
    const turn = t as Record<string, unknown>;
    const content = turn['content'];
    if (turn['role'] === 'user' || turn['role'] === 'system') {
      if (typeof content !== 'string') return bad(`${p}/content`, 'must be a string');
      turns.push({ role: turn['role'], content });
    } else if (turn['role'] === 'assistant') {
      const made: ChatToolCall[] = [];
      const list = turn['tool_calls'] ?? [];
      if (!Array.isArray(list)) return bad(`${p}/tool_calls`, 'must be an array of {id, type: "function", function: {name, arguments}}');
      list.forEach((c: unknown, j) => {
        const f = (c as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
        const id = (c as { id?: unknown } | null)?.id;
        if (typeof id !== 'string' || typeof f?.name !== 'string' || typeof f.arguments !== 'string') return bad(`${p}/tool_calls/${j}`, 'must be {id, type: "function", function: {name, arguments: "<JSON text>"}}');
        try {
          if (!isPlainObject(JSON.parse(f.arguments))) throw new Error('not an object');
        } catch {
          return bad(`${p}/tool_calls/${j}/function/arguments`, 'must be the JSON text of an object, as OpenAI sends arguments');
        }
        calls.set(id, f.name);
        made.push({ id, type: 'function', function: { name: f.name, arguments: f.arguments } });
      });
      if (content !== null && content !== undefined && typeof content !== 'string') return bad(`${p}/content`, 'must be a string (or null beside tool_calls)');
      if ((content ?? '') === '' && list.length === 0) return bad(p, 'an assistant turn says something or calls a tool');
      turns.push({ role: 'assistant', content: (content as string | null | undefined) ?? '', ...(made.length > 0 ? { tool_calls: made } : {}) });
    } else if (turn['role'] === 'tool') {
      const id = turn['tool_call_id'];
      if (typeof id !== 'string' || !calls.has(id)) return bad(`${p}/tool_call_id`, 'must name a tool call of an earlier assistant turn');
      if (typeof content !== 'string') return bad(`${p}/content`, 'must be a string');
      turns.push({ role: 'tool', tool_call_id: id, name: calls.get(id) as string, content });
    } else bad(`${p}/role`, 'must be "user", "assistant", "tool" or "system"');
  });
  return ok ? turns : undefined;
}

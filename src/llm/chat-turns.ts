/**
 * OpenAI's chat fine-tuning shape of a conversation: what `conversations.jsonl` of an `llm:` run
 * and `agent export --format chat` write, and what TRL, verl and OpenAI fine-tuning read. Tool-call
 * arguments are a JSON string, as OpenAI sends them; every tool turn names the call it answers.
 */
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

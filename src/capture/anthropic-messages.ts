/**
 * Anthropic's Messages API (`POST /v1/messages`) on the capture endpoint, as a translation to and
 * from the one request the capture completes (a `ChatCall`): the system prompt, text, `tool_use`
 * and `tool_result` blocks in; the answer as a `message` (text and `tool_use` blocks, `stop_reason`,
 * usage), or streamed as Anthropic streams it (`message_start`, a start, delta and stop per content
 * block, `message_delta`, `message_stop`). Errors in Anthropic's shape.
 */
import type { ServerResponse } from 'node:http';
import type { OpenAiTool } from '../llm/client.js';
import type { TemplateMessage } from '../llm/vllm.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { badRequest, contentText, isObject } from './capture-errors.js';
import { templateCall, type ChatAnswer, type ChatCall, type WireToolCall } from './chat-capture.js';

/** A Messages body checked and translated; a bad one is a 400 naming the field. */
export function messagesCall(body: unknown): ChatCall {
  if (!isObject(body as JsonValue)) return badRequest('the request body must be a JSON object', 'body');
  const b = body as JsonObject;
  if (typeof b['model'] !== 'string') return badRequest("'model' must be a string", 'model');
  if (!Array.isArray(b['messages']) || b['messages'].length === 0) return badRequest("'messages' must be a non-empty array", 'messages');
  const system = b['system'] === undefined ? undefined : contentText(b['system'], 'system');
  const template: TemplateMessage[] = system ? [{ role: 'system', content: system }] : [];
  const wire: JsonObject[] = system ? [{ role: 'system', content: system }] : [];
  b['messages'].forEach((m, i) => {
    const where = `messages[${i}]`;
    if (!isObject(m)) return badRequest(`${where} must be an object`, where);
    const blocks = typeof m['content'] === 'string' ? [{ type: 'text', text: m['content'] }] : Array.isArray(m['content']) ? m['content'] : badRequest(`${where}.content must be a string or an array of blocks`, `${where}.content`);
    if (m['role'] === 'assistant') {
      let text = '';
      const calls: WireToolCall[] = [];
      blocks.forEach((block, k) => {
        if (!isObject(block)) return badRequest(`${where}.content[${k}] must be a block`, `${where}.content`);
        if (block['type'] === 'text' && typeof block['text'] === 'string') text += block['text'];
        else if (block['type'] === 'tool_use' && typeof block['id'] === 'string' && typeof block['name'] === 'string' && isObject(block['input'])) calls.push({ id: block['id'], type: 'function', function: { name: block['name'], arguments: JSON.stringify(block['input']) } });
        else if (block['type'] !== 'thinking' && block['type'] !== 'redacted_thinking') badRequest(`${where}.content[${k}]: an assistant's blocks are text, tool_use or thinking`, `${where}.content`);
      });
      template.push({ role: 'assistant', content: text, ...(calls.length > 0 ? { tool_calls: calls.map(templateCall) } : {}) });
      wire.push({ role: 'assistant', content: text, ...(calls.length > 0 ? { tool_calls: calls as unknown as JsonValue[] } : {}) });
      return;
    }
    if (m['role'] !== 'user') return badRequest(`${where}.role must be user or assistant (got ${JSON.stringify(m['role'])})`, `${where}.role`);
    let text = '';
    blocks.forEach((block, k) => {
      if (!isObject(block)) return badRequest(`${where}.content[${k}] must be a block`, `${where}.content`);
      if (block['type'] === 'text' && typeof block['text'] === 'string') text += block['text'];
      else if (block['type'] === 'tool_result' && typeof block['tool_use_id'] === 'string') {
        const content = block['content'] === undefined ? '' : contentText(block['content'], `${where}.content[${k}].content`);
        template.push({ role: 'tool', content, tool_call_id: block['tool_use_id'] });
        wire.push({ role: 'tool', content, tool_call_id: block['tool_use_id'] });
      } else badRequest(`${where}.content[${k}]: a user's blocks are text or tool_result`, `${where}.content`);
    });
    if (text !== '') {
      template.push({ role: 'user', content: text });
      wire.push({ role: 'user', content: text });
    }
  });
  const tools: OpenAiTool[] = b['tools'] === undefined ? [] : Array.isArray(b['tools']) ? b['tools'].map((t, i) => tool(t, `tools[${i}]`)) : badRequest("'tools' must be an array", 'tools');
  return {
    model: b['model'],
    messages: template,
    tools,
    stream: b['stream'] === true,
    includeUsage: true,
    upstreamBody: { model: b['model'], messages: wire, ...(tools.length > 0 ? { tools: tools as unknown as JsonValue[] } : {}) },
  };
}

function tool(t: JsonValue, where: string): OpenAiTool {
  if (!isObject(t) || typeof t['name'] !== 'string') return badRequest(`${where} must be {"name", "input_schema"}`, where);
  const schema = isObject(t['input_schema']) ? t['input_schema'] : { type: 'object' };
  return { type: 'function', function: { name: t['name'], ...(typeof t['description'] === 'string' ? { description: t['description'] } : {}), parameters: schema as OpenAiTool['function']['parameters'] } };
}

/** The answer's content blocks: its text (when there is any), then a tool_use per call. */
function blocks(a: ChatAnswer): JsonObject[] {
  return [...(a.content ? [{ type: 'text', text: a.content }] : []), ...a.toolCalls.map((c) => ({ type: 'tool_use', id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) as JsonValue }))];
}

const stopReason = (a: ChatAnswer): string => (a.finishReason === 'tool_calls' ? 'tool_use' : a.finishReason === 'length' ? 'max_tokens' : 'end_turn');

/** The answer as Anthropic's `message` object. */
export function message(a: ChatAnswer): JsonObject {
  return { id: `msg_${a.id}`, type: 'message', role: 'assistant', model: a.model, content: blocks(a), stop_reason: stopReason(a), stop_sequence: null, usage: { input_tokens: a.usage.prompt_tokens, output_tokens: a.usage.completion_tokens } };
}

/** The answer streamed as Anthropic's server-sent events. */
export function writeMessageStream(res: ServerResponse, a: ChatAnswer): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const events: [string, JsonObject][] = [['message_start', { type: 'message_start', message: { ...message(a), content: [], stop_reason: null, usage: { input_tokens: a.usage.prompt_tokens, output_tokens: 0 } } }]];
  blocks(a).forEach((block, index) => {
    const tool = block['type'] === 'tool_use';
    events.push(['content_block_start', { type: 'content_block_start', index, content_block: tool ? { ...block, input: {} } : { type: 'text', text: '' } }]);
    events.push(['content_block_delta', { type: 'content_block_delta', index, delta: tool ? { type: 'input_json_delta', partial_json: JSON.stringify(block['input']) } : { type: 'text_delta', text: block['text'] as string } }]);
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  });
  events.push(['message_delta', { type: 'message_delta', delta: { stop_reason: stopReason(a), stop_sequence: null }, usage: { output_tokens: a.usage.completion_tokens } }]);
  events.push(['message_stop', { type: 'message_stop' }]);
  res.end(events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join(''));
}

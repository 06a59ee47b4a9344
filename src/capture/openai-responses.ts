/**
 * OpenAI's Responses API (`POST /v1/responses`, what OpenAI's Agents SDK and Codex-style programs
 * call) on the capture endpoint, as a translation to and from the one request the capture completes
 * (a `ChatCall`): `instructions`, input messages, `function_call` and `function_call_output` items
 * in (an assistant's message and the calls after it are one turn); the answer as a `response`
 * (a message item, a `function_call` item per call, usage), or streamed as OpenAI streams it
 * (`response.created` … `response.completed`, each event numbered). `previous_response_id` works
 * within an episode: the endpoint keeps each response's items, as OpenAI's server would.
 */
import type { ServerResponse } from 'node:http';
import type { OpenAiTool } from '../llm/client.js';
import type { TemplateMessage } from '../llm/vllm.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { badRequest, contentText, isObject } from './capture-errors.js';

/** The text parts a Responses input may carry. */
const RESPONSE_TEXT = ['input_text', 'output_text', 'text'];
import { templateCall, type ChatAnswer, type ChatCall, type WireToolCall } from './chat-capture.js';

/** A Responses request, translated; `items` is its whole input (a previous response's included), kept to answer the next one. */
export interface ResponsesCall extends ChatCall {
  readonly items: readonly JsonValue[];
}

/** A Responses body checked and translated; `previous` finds the items of an earlier response of the episode. */
export function responsesCall(body: unknown, previous: (id: string) => readonly JsonValue[] | undefined): ResponsesCall {
  if (!isObject(body as JsonValue)) return badRequest('the request body must be a JSON object', 'body');
  const b = body as JsonObject;
  if (typeof b['model'] !== 'string') return badRequest("'model' must be a string", 'model');
  const input: JsonValue[] = typeof b['input'] === 'string' ? [{ role: 'user', content: b['input'] }] : Array.isArray(b['input']) ? b['input'] : badRequest("'input' must be a string or an array of items", 'input');
  const prior = typeof b['previous_response_id'] === 'string' ? previous(b['previous_response_id']) : undefined;
  if (typeof b['previous_response_id'] === 'string' && !prior) return badRequest(`no response '${b['previous_response_id']}' in this episode`, 'previous_response_id');
  const items: JsonValue[] = [...(prior ?? []), ...input];
  const instructions = typeof b['instructions'] === 'string' ? b['instructions'] : undefined;
  const wire: JsonObject[] = instructions ? [{ role: 'system', content: instructions }] : [];
  /** The assistant turn being gathered: its text, then its calls. */
  let turn: { text: string; calls: WireToolCall[] } | undefined;
  const close = (): void => {
    if (!turn) return;
    wire.push({ role: 'assistant', content: turn.text, ...(turn.calls.length > 0 ? { tool_calls: turn.calls as unknown as JsonValue[] } : {}) });
    turn = undefined;
  };
  items.forEach((item, i) => {
    const where = `input[${i}]`;
    if (!isObject(item)) return badRequest(`${where} must be an object`, where);
    const type = item['type'] ?? 'message';
    if (type === 'function_call') {
      if (typeof item['call_id'] !== 'string' || typeof item['name'] !== 'string' || typeof item['arguments'] !== 'string') return badRequest(`${where}: a function_call needs call_id, name and arguments`, where);
      (turn ??= { text: '', calls: [] }).calls.push({ id: item['call_id'], type: 'function', function: { name: item['name'], arguments: item['arguments'] } });
      return;
    }
    if (type === 'reasoning') return;
    if (type === 'function_call_output') {
      close();
      if (typeof item['call_id'] !== 'string') return badRequest(`${where}.call_id must be a string`, `${where}.call_id`);
      wire.push({ role: 'tool', content: contentText(item['output'] ?? '', `${where}.output`, RESPONSE_TEXT), tool_call_id: item['call_id'] });
      return;
    }
    if (type !== 'message') return badRequest(`${where}.type ${JSON.stringify(type)} is not supported (message, function_call, function_call_output, reasoning)`, `${where}.type`);
    const role = item['role'];
    const text = contentText(item['content'] ?? '', `${where}.content`, RESPONSE_TEXT);
    if (role === 'assistant') {
      // An assistant's message opens its turn; the calls that follow it belong to the same turn.
      close();
      turn = { text, calls: [] };
      return;
    }
    close();
    if (role === 'user') wire.push({ role: 'user', content: text });
    else if (role === 'system' || role === 'developer') wire.push({ role: 'system', content: text });
    else badRequest(`${where}.role must be user, assistant, system or developer (got ${JSON.stringify(role)})`, `${where}.role`);
  });
  close();
  const tools = b['tools'] === undefined ? [] : Array.isArray(b['tools']) ? b['tools'].filter((t) => isObject(t) && t['type'] === 'function').map((t, i) => tool(t, `tools[${i}]`)) : badRequest("'tools' must be an array", 'tools');
  return {
    model: b['model'],
    messages: wire.map(templateMessage),
    tools,
    stream: b['stream'] === true,
    includeUsage: true,
    upstreamBody: { model: b['model'], messages: wire, ...(tools.length > 0 ? { tools: tools as unknown as JsonValue[] } : {}) },
    items,
  };
}

function templateMessage(m: JsonObject): TemplateMessage {
  const content = m['content'] as string;
  if (m['role'] === 'tool') return { role: 'tool', content, tool_call_id: m['tool_call_id'] as string };
  if (m['role'] === 'assistant') {
    const calls = (m['tool_calls'] ?? []) as unknown as WireToolCall[];
    return { role: 'assistant', content, ...(calls.length > 0 ? { tool_calls: calls.map(templateCall) } : {}) };
  }
  return { role: m['role'] as 'user' | 'system', content };
}

function tool(t: JsonValue, where: string): OpenAiTool {
  if (!isObject(t) || typeof t['name'] !== 'string') return badRequest(`${where} must be {"type": "function", "name", "parameters"}`, where);
  const params = isObject(t['parameters']) ? t['parameters'] : { type: 'object' };
  return { type: 'function', function: { name: t['name'], ...(typeof t['description'] === 'string' ? { description: t['description'] } : {}), parameters: params as OpenAiTool['function']['parameters'] } };
}

/** The answer's output items: its message (when it has text), then a function_call per call. */
export function outputItems(a: ChatAnswer): JsonObject[] {
  return [
    ...(a.content ? [{ type: 'message', id: `msg_${a.id}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: a.content, annotations: [] }] }] : []),
    ...a.toolCalls.map((c) => ({ type: 'function_call', id: `fc_${c.id}`, call_id: c.id, name: c.function.name, arguments: c.function.arguments, status: 'completed' })),
  ];
}

/** The answer as a Responses `response` object. */
export function response(a: ChatAnswer, call: ResponsesCall): JsonObject {
  return {
    id: `resp_${a.id}`,
    object: 'response',
    created_at: a.created,
    status: a.finishReason === 'length' ? 'incomplete' : 'completed',
    error: null,
    incomplete_details: a.finishReason === 'length' ? { reason: 'max_output_tokens' } : null,
    instructions: null,
    metadata: {},
    model: a.model,
    output: outputItems(a),
    parallel_tool_calls: true,
    temperature: null,
    tool_choice: 'auto',
    tools: call.tools.map((t) => ({ type: 'function', name: t.function.name, ...(t.function.description !== undefined ? { description: t.function.description } : {}), parameters: t.function.parameters as unknown as JsonValue, strict: false })),
    top_p: null,
    usage: { input_tokens: a.usage.prompt_tokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: a.usage.completion_tokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: a.usage.total_tokens },
  };
}

/** The answer streamed as OpenAI's Responses events. */
export function writeResponseStream(res: ServerResponse, a: ChatAnswer, call: ResponsesCall): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const done = response(a, call);
  const events: JsonObject[] = [
    { type: 'response.created', response: { ...done, status: 'in_progress', output: [], usage: null } },
    { type: 'response.in_progress', response: { ...done, status: 'in_progress', output: [], usage: null } },
  ];
  outputItems(a).forEach((item, output_index) => {
    const id = item['id'] as string;
    if (item['type'] === 'message') {
      const text = a.content ?? '';
      const part = { type: 'output_text', text, annotations: [] };
      events.push(
        { type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress', content: [] } },
        { type: 'response.content_part.added', item_id: id, output_index, content_index: 0, part: { ...part, text: '' } },
        { type: 'response.output_text.delta', item_id: id, output_index, content_index: 0, delta: text },
        { type: 'response.output_text.done', item_id: id, output_index, content_index: 0, text },
        { type: 'response.content_part.done', item_id: id, output_index, content_index: 0, part },
        { type: 'response.output_item.done', output_index, item },
      );
    } else {
      events.push(
        { type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress', arguments: '' } },
        { type: 'response.function_call_arguments.delta', item_id: id, output_index, delta: item['arguments'] as string },
        { type: 'response.function_call_arguments.done', item_id: id, output_index, arguments: item['arguments'] as string },
        { type: 'response.output_item.done', output_index, item },
      );
    }
  });
  events.push({ type: a.finishReason === 'length' ? 'response.incomplete' : 'response.completed', response: done });
  res.end(events.map((e, sequence_number) => `event: ${e['type'] as string}\ndata: ${JSON.stringify({ ...e, sequence_number })}\n\n`).join(''));
}

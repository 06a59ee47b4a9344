/**
 * A Chat Completions answer streamed as OpenAI streams it (`stream: true`): server-sent events of
 * `chat.completion.chunk` objects — the role first, then the content, then each tool call (its
 * id, name and arguments in the chunk that opens it), then the finish reason, the usage when
 * `stream_options.include_usage` asked for it, and `data: [DONE]`. The answer is whole before the
 * first event (it was generated in one request upstream), so a streaming and a non-streaming
 * request record the same turn.
 */
import type { ServerResponse } from 'node:http';
import type { ChatAnswer } from './chat-capture.js';

export function writeChatStream(res: ServerResponse, a: ChatAnswer, includeUsage: boolean): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const base = { id: a.id, object: 'chat.completion.chunk', created: a.created, model: a.model };
  const events: object[] = [{ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] }];
  if (a.content) events.push({ ...base, choices: [{ index: 0, delta: { content: a.content }, logprobs: null, finish_reason: null }] });
  a.toolCalls.forEach((call, index) => events.push({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index, id: call.id, type: 'function', function: call.function }] }, logprobs: null, finish_reason: null }] }));
  events.push({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: a.finishReason }] });
  if (includeUsage) events.push({ ...base, choices: [], usage: a.usage });
  res.end(events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n');
}

/**
 * A fake LLM API on 127.0.0.1 for tests: Anthropic's `POST /v1/messages` and the OpenAI-compatible
 * `POST /v1/chat/completions` (and `GET /v1/models`, naming one model: `fake-chat-model`), answering
 * from a script (status, headers, text), and recording every request. No network, no key.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRequest {
  readonly provider: 'anthropic' | 'openai';
  readonly body: { readonly model: string; readonly messages: readonly { readonly role: string; readonly content: unknown }[]; readonly system?: unknown; readonly max_tokens?: number; readonly tools?: readonly unknown[] };
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface FakeReply {
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly text?: string;
  /** Tool calls the fake model makes (Anthropic tool_use blocks, or OpenAI tool_calls). */
  readonly toolCalls?: readonly { readonly name: string; readonly arguments: Record<string, unknown> }[];
  readonly inputTokens?: number;
  readonly outputTokens?: number;
}

export interface FakeLlmServer extends AsyncDisposable {
  readonly url: string;
  readonly requests: FakeRequest[];
}

export async function startFakeLlmServer(reply: (req: FakeRequest, n: number) => FakeReply = () => ({ text: 'score: 0.7' })): Promise<FakeLlmServer> {
  const requests: FakeRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'fake-chat-model', object: 'model' }] }));
        return;
      }
      const provider = req.url === '/v1/messages' ? 'anthropic' : req.url === '/v1/chat/completions' ? 'openai' : undefined;
      if (!provider || req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      const request: FakeRequest = { provider, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as FakeRequest['body'], headers: req.headers };
      requests.push(request);
      const r = reply(request, requests.length);
      const status = r.status ?? 200;
      const headers = { 'content-type': 'application/json', ...(r.headers ?? {}) };
      if (status !== 200) {
        res.writeHead(status, headers).end(JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: `fake ${status}` } }));
        return;
      }
      const text = r.text ?? '';
      const input = r.inputTokens ?? 100;
      const output = r.outputTokens ?? 10;
      const calls = (r.toolCalls ?? []).map((c, i) => ({ ...c, id: `call_${requests.length}_${i}` }));
      const body =
        provider === 'anthropic'
          ? {
              id: `msg_${requests.length}`,
              type: 'message',
              role: 'assistant',
              model: request.body.model,
              content: [...(text ? [{ type: 'text', text }] : []), ...calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.arguments }))],
              stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn',
              stop_sequence: null,
              usage: { input_tokens: input, output_tokens: output },
            }
          : {
              id: `chatcmpl-${requests.length}`,
              object: 'chat.completion',
              created: 0,
              model: request.body.model,
              choices: [{ index: 0, message: { role: 'assistant', content: text, ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } })) } : {}) }, finish_reason: calls.length > 0 ? 'tool_calls' : 'stop' }],
              usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
            };
      res.writeHead(200, headers).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

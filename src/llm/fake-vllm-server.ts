/**
 * A fake vLLM OpenAI-compatible server on 127.0.0.1 for tests and benchmarks: vLLM's `/tokenize`
 * (ChatML, Qwen's tool-result grouping), `/v1/completions` from token ids with `token_ids`,
 * `prompt_token_ids` and `logprobs`, and `/v1/models`. Its tokenizer is one id per UTF-16 unit
 * (offset past the special tokens), so tests can read prompts back, but `/tokenize` merges `{"`
 * into one id as a BPE tokenizer would, while the "model" samples it as two (models do sample
 * tokenizations other than the tokenizer's own): a client that re-encoded what the model generated,
 * instead of keeping its ids, would record other ids than the server's, which the tests catch. What the "model" says comes
 * from `reply(promptText)`. No model, no network: its answers cost microseconds, so a benchmark
 * against it measures the client. `omit` takes routes or fields away, to test refusals.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const SPECIAL = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;
const OFFSET = SPECIAL.length;
/** Pairs the tokenizer encodes as one id each (above every UTF-16 unit): `{"` opens every tool call's JSON. */
const MERGES = ['{"'] as const;
const MERGED = OFFSET + 0x10000;
export const FAKE_END_OF_TURN = 2;

export interface FakeVllmOptions {
  /** What the model says after a prompt (its text as the template rendered it): text, and whether it ends its turn (else max_tokens cuts it). */
  readonly reply: (prompt: string, n: number) => string;
  readonly maxModelLen?: number;
  /** Leave out a route or a field: `tokenize`, `token_ids`, `logprobs`. */
  readonly omit?: readonly ('tokenize' | 'token_ids' | 'logprobs')[];
  /** Answer this many completions, then close every connection and refuse more (a server that died). */
  readonly dieAfter?: number;
  readonly model?: string;
  /** Each completion answers after this long (a generation's time on a real server; default 0). */
  readonly delayMs?: number;
  /** Holds a completion's answer until the promise settles (a test's barrier: requests that must be in flight together). */
  readonly gate?: (prompt: string) => Promise<void> | undefined;
  /** Render the last assistant turn with an empty `<think>` block, earlier ones without (as Qwen3's template does): not prefix-stable. */
  readonly thinkingTemplate?: boolean;
  /** Report each completion's `weight_version` (as our tiny server does after a weight update): this one, read per completion. */
  readonly weightVersion?: () => number;
}

/** One completion as the fake produced it. */
export interface FakeCompletion {
  readonly prompt_token_ids: readonly number[];
  readonly token_ids: readonly number[];
  readonly logprobs: readonly number[];
  readonly seed: number | undefined;
}

export interface FakeVllmServer extends AsyncDisposable {
  /** The OpenAI base URL (`…/v1`). */
  readonly url: string;
  readonly completions: FakeCompletion[];
  /** Requests by route. */
  readonly requests: Map<string, number>;
}

/** The tokenizer's ids of a text; `merge: false` gives one id per unit, as the fake model samples. */
export function encode(text: string, merge = true): number[] {
  const out: number[] = [];
  for (let i = 0; i < text.length; ) {
    const special = SPECIAL.findIndex((s) => text.startsWith(s, i));
    // Special tokens are split out first, as a real tokenizer does: a pair never reaches into one.
    const pair = merge && special === -1 && !SPECIAL.some((sp) => text.startsWith(sp, i + 1)) ? MERGES.findIndex((m) => text.startsWith(m, i)) : -1;
    if (special !== -1) {
      out.push(special);
      i += (SPECIAL[special] as string).length;
    } else if (pair !== -1) {
      out.push(MERGED + pair);
      i += 2;
    } else out.push(text.charCodeAt(i++) + OFFSET);
  }
  return out;
}

export function decode(ids: readonly number[], skipSpecial = false): string {
  return ids.map((id) => (id < OFFSET ? (skipSpecial ? '' : SPECIAL[id]) : id >= MERGED ? MERGES[id - MERGED] : String.fromCharCode(id - OFFSET))).join('');
}

interface Message {
  readonly role: string;
  readonly content: string;
  readonly tool_calls?: readonly { readonly function: { readonly name: string; readonly arguments: unknown } }[];
}

/** An assistant turn's content and its calls as Hermes writes them (Qwen2.5's template). */
function assistantContent(m: Message): string {
  const calls = (m.tool_calls ?? []).map((c) => `<tool_call>\n${JSON.stringify({ name: c.function.name, arguments: c.function.arguments })}\n</tool_call>`);
  return [m.content, ...calls].filter((part) => part !== '').join('\n');
}

/** ChatML as Qwen renders it: a system turn (with the tools when given), tool results grouped into one user turn. */
function renderChat(messages: readonly Message[], tools: readonly unknown[] | undefined, addGenerationPrompt: boolean, thinking = false): string {
  let out = '';
  const first = messages[0];
  const system = first?.role === 'system' ? first.content : 'You are a helpful assistant.';
  out += `<|im_start|>system\n${system}${tools && tools.length > 0 ? `\n\n# Tools\n<tools>\n${tools.map((t) => JSON.stringify(t)).join('\n')}\n</tools>` : ''}<|im_end|>\n`;
  messages.forEach((m, i) => {
    if (m.role === 'system' && i === 0) return;
    if (m.role === 'tool') {
      if (messages[i - 1]?.role !== 'tool') out += '<|im_start|>user';
      out += `\n<tool_response>\n${m.content}\n</tool_response>`;
      if (messages[i + 1]?.role !== 'tool') out += '<|im_end|>\n';
    } else if (m.role === 'assistant' && thinking && i === messages.length - 1) out += `<|im_start|>assistant\n<think>\n\n</think>\n\n${assistantContent(m)}<|im_end|>\n`;
    else out += `<|im_start|>${m.role}\n${m.role === 'assistant' ? assistantContent(m) : m.content}<|im_end|>\n`;
  });
  if (addGenerationPrompt) out += '<|im_start|>assistant\n';
  return out;
}

export async function startFakeVllmServer(options: FakeVllmOptions): Promise<FakeVllmServer> {
  const completions: FakeCompletion[] = [];
  const requests = new Map<string, number>();
  const maxModelLen = options.maxModelLen ?? 32_768;
  const omit = new Set(options.omit ?? []);
  const model = options.model ?? 'fake-model';
  let dead = false;
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((req, res) => {
    if (dead) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const route = req.url ?? '';
      requests.set(route, (requests.get(route) ?? 0) + 1);
      const send = (status: number, body: unknown): void => {
        const data = JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }).end(data);
      };
      const body = (chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {}) as Record<string, unknown>;
      if (req.method === 'GET' && route === '/v1/models') return send(200, { object: 'list', data: [{ id: model, object: 'model', max_model_len: maxModelLen }] });
      if (req.method === 'POST' && route === '/tokenize' && !omit.has('tokenize')) {
        const ids = Array.isArray(body['messages']) ? encode(renderChat(body['messages'] as Message[], body['tools'] as unknown[] | undefined, body['add_generation_prompt'] !== false, options.thinkingTemplate)) : encode(String(body['prompt'] ?? ''));
        return send(200, { count: ids.length, max_model_len: maxModelLen, tokens: ids });
      }
      if (req.method === 'POST' && route === '/v1/completions') {
        const prompt = body['prompt'] as number[];
        const maxTokens = typeof body['max_tokens'] === 'number' ? body['max_tokens'] : 16;
        // Sampled one id per unit: not the tokenizer's split of the same text (see encode).
        const said = [...encode(options.reply(decode(prompt), completions.length), false), FAKE_END_OF_TURN];
        const ids = said.slice(0, maxTokens);
        const logprobs = ids.map((_, i) => -((completions.length % 7) + 1) / (i + 2));
        const seed = typeof body['seed'] === 'number' ? body['seed'] : undefined;
        completions.push({ prompt_token_ids: prompt, token_ids: ids, logprobs, seed });
        const choice = {
          index: 0,
          text: decode(ids, true),
          ...(omit.has('logprobs') ? {} : { logprobs: { text_offset: [], token_logprobs: logprobs, tokens: ids.map((id) => decode([id])), top_logprobs: [] } }),
          finish_reason: ids.length === said.length ? 'stop' : 'length',
          stop_reason: null,
          ...(omit.has('token_ids') || body['return_token_ids'] !== true ? {} : { token_ids: ids, prompt_token_ids: prompt }),
        };
        const answer = { id: `cmpl-${completions.length}`, object: 'text_completion', model, choices: [choice], usage: { prompt_tokens: prompt.length, completion_tokens: ids.length }, ...(options.weightVersion ? { weight_version: options.weightVersion() } : {}) };
        const gate = options.gate?.(decode(prompt));
        if (gate) void gate.then(() => send(200, answer));
        else if (options.delayMs) {
          const timer = setTimeout(() => {
            timers.delete(timer);
            send(200, answer);
          }, options.delayMs);
          timers.add(timer);
        } else send(200, answer);
        if (options.dieAfter !== undefined && completions.length >= options.dieAfter) {
          dead = true;
          server.closeAllConnections();
        }
        return;
      }
      send(404, { detail: 'Not Found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    completions,
    requests,
    async [Symbol.asyncDispose]() {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

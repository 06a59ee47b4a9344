/**
 * Token-in, token-out generation against vLLM's OpenAI-compatible server: the chat template
 * renders through the server's own `POST /tokenize` (at the server root), and every generation is
 * `POST /v1/completions` with the prompt as token ids, `return_token_ids` and `logprobs`, so the
 * ids and log-probabilities a trainer gets are exactly the sampler's (vLLM's
 * `entrypoints/openai/protocol.py`: `TokenizeChatRequest`, `TokenizeResponse`,
 * `CompletionRequest`, `CompletionResponseChoice` with `token_ids` and `prompt_token_ids`).
 *
 * `connect` checks the server before any episode runs: a server without `/tokenize`, or whose
 * completions carry no `token_ids` or `logprobs`, is refused then, naming what is missing.
 */
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { sleep } from '../shared/abort.js';
import { AgentError, describeError, isAgentError, oneLine } from '../shared/errors.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { OpenAiTool } from './client.js';

/** A message as the server's chat template takes it (OpenAI's chat shape). */
export type TemplateMessage =
  | { readonly role: 'system' | 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly tool_calls?: readonly TemplateToolCall[] }
  | { readonly role: 'tool'; readonly content: string; readonly tool_call_id: string; readonly name?: string };

/** A call in an assistant message, as chat templates read it (arguments as an object: Qwen's and Llama's templates `tojson` them). */
export interface TemplateToolCall {
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: JsonObject };
}

/** The sampling settings of every generation of a run, recorded with it (snake_case: they are written as they are sent). */
export interface SamplingSettings {
  readonly temperature: number;
  readonly top_p: number;
  /** Sent on every request: vLLM's default of 16 would cut a tool call short. */
  readonly max_tokens: number;
}

/** A completion's `weight_version` (top level, or SGLang's `meta_info`), when it is a whole number. */
function weightVersionOf(answer: JsonObject): number | undefined {
  const meta = answer['meta_info'];
  const v = answer['weight_version'] ?? (meta !== null && typeof meta === 'object' && !Array.isArray(meta) ? meta['weight_version'] : undefined);
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) ? n : undefined;
}

/** One generation as the server produced it. */
export interface Completion {
  /** The generated ids, the end-of-turn token included when the model stopped on it. */
  readonly token_ids: readonly number[];
  /** The sampler's log-probability of each generated id. */
  readonly logprobs: readonly number[];
  /** The server's detokenized text of them (special tokens skipped, as vLLM does by default). */
  readonly text: string;
  /** Each id's text (vLLM's `logprobs.tokens`), when the server gave it. */
  readonly token_strs?: readonly string[];
  /** `stop` (an end-of-turn token or stop string) or `length` (max_tokens reached). */
  readonly finish_reason: string;
  /** The stop string or token id that stopped it; null for the model's EOS. */
  readonly stop_reason: number | string | null;
  /** The model name the server answered with. */
  readonly model: string;
  /**
   * The weights' version the server generated with, when it says (a top-level `weight_version`,
   * as our tiny server and SGLang's `meta_info` report it; vLLM does not).
   */
  readonly weight_version?: number;
}

export interface VllmServerOptions {
  /** The server's OpenAI base URL (`http://host:8000/v1`) or its root; `/tokenize` is at the root. */
  readonly baseURL: string;
  readonly model: string;
  /** Sent as a bearer token when set (vLLM's `--api-key`). */
  readonly apiKey?: string;
  /** Per request. */
  readonly timeoutMs?: number;
  /** Tries of a request that could not reach the server or got a 5xx (default 3). */
  readonly attempts?: number;
}

const RETRY_DELAYS_MS = [250, 1_000, 4_000];
/** Connections kept open between turns (a rollout makes two requests a turn, hundreds at once). */
const HTTP_AGENT = new HttpAgent({ keepAlive: true });
const HTTPS_AGENT = new HttpsAgent({ keepAlive: true });

/** A vLLM-compatible server, checked: the model it serves, its context length, and the three calls token mode makes. */
export class VllmServer {
  readonly model: string;
  /** The server's context length (`max_model_len` of `/tokenize`). */
  readonly maxModelLen: number;
  readonly root: string;
  readonly #options: VllmServerOptions;

  private constructor(options: VllmServerOptions, root: string, maxModelLen: number) {
    this.#options = options;
    this.model = options.model;
    this.root = root;
    this.maxModelLen = maxModelLen;
  }

  /**
   * Checks that the server can render chats (`/tokenize` with messages answers `tokens` and
   * `max_model_len`) and generate from ids (`/v1/completions` answers `token_ids` and `logprobs`).
   */
  static async connect(options: VllmServerOptions, signal?: AbortSignal): Promise<VllmServer> {
    const root = rootOf(options.baseURL);
    const probe = new VllmServer(options, root, Number.MAX_SAFE_INTEGER);
    const rendered = await probe.#post('/tokenize', { model: options.model, messages: [{ role: 'user', content: 'hi' }], add_generation_prompt: true }, signal, 'render a chat with the server\'s template');
    const tokens = idList(rendered['tokens']);
    const maxModelLen = rendered['max_model_len'];
    if (!tokens || tokens.length === 0) throw incompatible(root, "its /tokenize answer has no 'tokens' list", 'Serve the model with vLLM (its OpenAI-compatible server has /tokenize), or a server with the same route.');
    if (typeof maxModelLen !== 'number' || !Number.isInteger(maxModelLen) || maxModelLen < 1) throw incompatible(root, "its /tokenize answer has no 'max_model_len'", 'Use vLLM\'s /tokenize, which answers the context length beside the tokens.');
    const server = new VllmServer(options, root, maxModelLen);
    await server.complete(tokens, { temperature: 0, top_p: 1, max_tokens: 1 }, 0, signal);
    return server;
  }

  /** The chat as the server's template renders it, as ids. */
  async render(messages: readonly TemplateMessage[], options: { readonly tools?: readonly OpenAiTool[]; readonly addGenerationPrompt: boolean }, signal?: AbortSignal): Promise<number[]> {
    const body: JsonObject = { model: this.model, messages: messages as unknown as JsonValue[], add_generation_prompt: options.addGenerationPrompt, ...(options.tools && options.tools.length > 0 ? { tools: options.tools as unknown as JsonValue[] } : {}) };
    const ids = idList((await this.#post('/tokenize', body, signal, 'render a chat'))['tokens']);
    if (!ids) throw incompatible(this.root, "its /tokenize answer has no 'tokens' list", 'Serve the model with vLLM, or a server with the same route.');
    return ids;
  }

  /** One generation from `prompt` (ids), with the run's sampling settings and this request's seed. */
  async complete(prompt: readonly number[], sampling: SamplingSettings, seed: number, signal?: AbortSignal): Promise<Completion> {
    const body: JsonObject = { model: this.model, prompt: prompt as number[], max_tokens: sampling.max_tokens, temperature: sampling.temperature, top_p: sampling.top_p, seed, n: 1, logprobs: 1, return_token_ids: true, stream: false };
    const answer = await this.#post('/v1/completions', body, signal, 'generate from token ids');
    const choice = Array.isArray(answer['choices']) ? (answer['choices'][0] as JsonObject | undefined) : undefined;
    if (!choice || typeof choice !== 'object') throw incompatible(this.root, "its /v1/completions answer has no 'choices'", 'Use an OpenAI-compatible completions server (vLLM).');
    const ids = idList(choice['token_ids']);
    if (!ids) throw incompatible(this.root, "its completions carry no 'token_ids' (vLLM answers them in each choice when the request has return_token_ids: true)", 'Use vLLM 0.10.2 or later, or a server that answers token ids.');
    const logprobs = (choice['logprobs'] as JsonObject | null | undefined)?.['token_logprobs'];
    if (!Array.isArray(logprobs) || logprobs.length !== ids.length || !logprobs.every((l) => typeof l === 'number')) {
      throw incompatible(this.root, `its completions carry no 'logprobs.token_logprobs' of one number per token (${ids.length} token ids)`, 'Use vLLM\'s completions with logprobs: 1, or a server that answers them.');
    }
    const echoed = idList(choice['prompt_token_ids']);
    if (echoed) {
      const at = firstDifference(echoed, prompt);
      if (at !== -1) throw new AgentError('LLM_INCOMPATIBLE', `the server at ${this.root} generated from other prompt ids than it was sent (they differ at token ${at} of ${prompt.length})`, { hint: 'The server must take the prompt ids as given (vLLM does with a list of ints as prompt): check for a proxy that re-encodes prompts.' });
    }
    const stop = choice['stop_reason'];
    const strs = (choice['logprobs'] as JsonObject)['tokens'];
    const version = weightVersionOf(answer);
    return {
      token_ids: ids,
      logprobs: logprobs as number[],
      text: typeof choice['text'] === 'string' ? choice['text'] : '',
      ...(Array.isArray(strs) && strs.length === ids.length && strs.every((t) => typeof t === 'string') ? { token_strs: strs as string[] } : {}),
      finish_reason: typeof choice['finish_reason'] === 'string' ? choice['finish_reason'] : 'stop',
      stop_reason: typeof stop === 'number' || typeof stop === 'string' ? stop : null,
      model: typeof answer['model'] === 'string' ? answer['model'] : this.model,
      ...(version !== undefined ? { weight_version: version } : {}),
    };
  }

  /**
   * One POST over a kept-alive connection. node:http rather than fetch: a turn makes two requests,
   * and fetch's per-request cost (streams, Headers, promises) was most of what a turn cost us.
   */
  #request(url: string, payload: string, signal: AbortSignal | undefined): Promise<{ readonly status: number; readonly body: string }> {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(
        target,
        {
          method: 'POST',
          agent: target.protocol === 'https:' ? HTTPS_AGENT : HTTP_AGENT,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...(this.#options.apiKey ? { authorization: `Bearer ${this.#options.apiKey}` } : {}) },
          signal: timeoutSignal(signal, this.#options.timeoutMs ?? 120_000),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** POSTs JSON; connection failures and 5xx are tried again (3 tries by default), other statuses fail at once. */
  async #post(route: string, body: JsonObject, signal: AbortSignal | undefined, what: string): Promise<JsonObject> {
    const url = `${this.root}${route}`;
    const attempts = this.#options.attempts ?? 3;
    const payload = JSON.stringify(body);
    for (let attempt = 1; ; attempt++) {
      let failure: string;
      try {
        const res = await this.#request(url, payload, signal);
        const text = res.body;
        if (res.status >= 200 && res.status < 300) {
          const parsed = parseObject(text);
          if (!parsed) throw incompatible(this.root, `its ${route} answered something that is not a JSON object`, 'Point --llm-base-url at a vLLM OpenAI-compatible server.');
          return parsed;
        }
        if (res.status === 404 || res.status === 405) throw incompatible(this.root, `it has no POST ${route} (HTTP ${res.status}), needed to ${what}`, route === '/tokenize' ? 'Token mode needs vLLM\'s /tokenize (at the server root, beside /v1): serve the model with vLLM, or pass --llm-base-url of such a server.' : 'Serve the model with vLLM\'s OpenAI-compatible server.');
        if (res.status < 500) throw new AgentError('LLM_INCOMPATIBLE', `the server at ${this.root} refused POST ${route} (HTTP ${res.status}): ${oneLine(errorMessage(text))}`, { hint: 'Check --model (the name the server serves: GET /v1/models), and the sampling settings.' });
        failure = `HTTP ${res.status}: ${oneLine(errorMessage(text))}`;
      } catch (err) {
        if (isAgentError(err)) throw err;
        if (signal?.aborted) throw signal.reason;
        failure = describeError(err);
      }
      if (attempt >= attempts) {
        throw new AgentError('LLM_UNAVAILABLE', `the inference server at ${this.root} failed POST ${route} ${attempts} times (${failure})`, { hint: `Is it up? (curl ${this.root}/v1/models). Started before any episode, nothing ran; mid-run, the episodes waiting on it fail and the ones done are kept.` });
      }
      await sleep(RETRY_DELAYS_MS[attempt - 1] ?? 4_000, signal);
    }
  }
}

/** The model a server serves first (`GET /v1/models`): what a run that names no model (gold turns) renders with. */
export async function servedModel(baseURL: string, signal?: AbortSignal): Promise<string> {
  const root = rootOf(baseURL);
  let answer: unknown;
  try {
    const res = await fetch(`${root}/v1/models`, { signal: timeoutSignal(signal, 30_000) });
    answer = await res.json();
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw new AgentError('LLM_UNAVAILABLE', `cannot read GET ${root}/v1/models: ${describeError(err)}`, { hint: `Is the inference server up? (curl ${root}/v1/models)` });
  }
  const data = (answer as { data?: { id?: unknown }[] } | null)?.data;
  const id = Array.isArray(data) ? data[0]?.id : undefined;
  if (typeof id !== 'string') throw incompatible(root, "its GET /v1/models lists no model ('data[0].id')", 'Point --llm-base-url at a vLLM OpenAI-compatible server.');
  return id;
}

function rootOf(baseURL: string): string {
  return baseURL.replace(/\/+$/, '').replace(/\/v1$/, '');
}

function incompatible(root: string, what: string, hint: string): AgentError {
  return new AgentError('LLM_INCOMPATIBLE', `the server at ${root} is not vLLM-compatible for token mode: ${what}`, { hint });
}

/** The caller's signal, and a deadline for this one request. */
function timeoutSignal(signal: AbortSignal | undefined, ms: number): AbortSignal {
  const timeout = AbortSignal.timeout(ms);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

function idList(value: JsonValue | undefined): number[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === 'number' && Number.isInteger(v)) ? (value as number[]) : undefined;
}

function parseObject(text: string): JsonObject | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}

/** vLLM's error body (`{error: {message}}`, or FastAPI's `{detail}`), else the text. */
function errorMessage(text: string): string {
  const body = parseObject(text);
  const error = body?.['error'];
  if (typeof error === 'object' && error !== null && !Array.isArray(error) && typeof error['message'] === 'string') return error['message'];
  if (typeof body?.['message'] === 'string') return body['message'];
  if (body?.['detail'] !== undefined) return JSON.stringify(body['detail']);
  return text;
}

/** The first index where two id lists differ (a length difference counts), or -1. */
export function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

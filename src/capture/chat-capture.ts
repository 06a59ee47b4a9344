/**
 * One episode's model calls as a program makes them (OpenAI Chat Completions), answered and
 * recorded as turns of the episode.
 *
 * In token mode each request is rendered by the inference server's chat template and completed
 * from token ids, as the `llm:` policy's turns are (token-chat.ts). A program owns its history, so
 * the episode keeps segments: a request whose messages extend a segment's (its messages, then the
 * reply it was given) continues that segment, only the new messages rendered and appended; any
 * other request (a compacted history, an edited turn, a sub-agent's conversation) starts a new
 * segment from its whole prompt. Generated ids are never re-encoded. Without token routes upstream,
 * requests pass through as text and are recorded without ids.
 */
import type { LlmCallReport, OpenAiTool } from '../llm/client.js';
import type { TokenChat } from '../llm/token-chat.js';
import { TokenTranscript } from '../llm/token-transcript.js';
import type { TemplateMessage, TemplateToolCall } from '../llm/vllm.js';
import { AgentError, isAgentError } from '../shared/errors.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { badRequest, CaptureError, contentText } from './capture-errors.js';

/** A tool call as OpenAI's chat format carries it: arguments as a JSON string. */
export interface WireToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

/** A Chat Completions request, checked. */
export interface ChatCall {
  readonly model: string;
  readonly messages: readonly TemplateMessage[];
  readonly tools: readonly OpenAiTool[];
  readonly stream: boolean;
  /** `stream_options.include_usage`: a last chunk with the usage. */
  readonly includeUsage: boolean;
  /** The request as an OpenAI Chat Completions body (what a pass-through forwards upstream). */
  readonly upstreamBody: JsonObject;
}

/** The answer, as one object; streaming renders it as chunks (sse.ts). */
export interface ChatAnswer {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly content: string | null;
  readonly toolCalls: readonly WireToolCall[];
  readonly finishReason: 'stop' | 'length' | 'tool_calls';
  readonly usage: { readonly prompt_tokens: number; readonly completion_tokens: number; readonly total_tokens: number };
}

/** Where a capture's completions come from: token mode against a vLLM-compatible server, or plain pass-through. */
export type CaptureUpstream = { readonly kind: 'tokens'; readonly chat: TokenChat } | { readonly kind: 'text'; readonly baseURL: string; readonly apiKey: string | undefined; readonly model: string };

interface Segment {
  readonly transcript: TokenTranscript;
  readonly index: number;
  /** The tools it was rendered with (JSON). */
  readonly tools: string;
  /** Its messages so far, normalised (JSON each), the replies it was given included. */
  messages: string[];
  /** A turn of it is being answered: a request in parallel (a sub-agent branching from the same history) starts a segment of its own. */
  busy: boolean;
  /** A turn failed after the sequence was extended: it is never extended again. */
  spent: boolean;
}

export class ChatCapture {
  readonly #upstream: CaptureUpstream;
  readonly #episode: number;
  readonly #report: (call: LlmCallReport) => void;
  readonly #failed: ((err: AgentError) => void) | undefined;
  readonly #maxTurns: number;
  readonly #exhausted: (() => void) | undefined;
  readonly #segments: Segment[] = [];
  #turns = 0;

  /**
   * `report` hears every model call (a failed one too); `failed`, an inference server that failed a
   * request after its retries (the program is answered a 502 all the same): the episode fails with it;
   * `exhausted`, a request past `maxTurns` model calls (refused with a 400, as every one after it).
   */
  constructor(upstream: CaptureUpstream, episode: number, hooks: { readonly report: (call: LlmCallReport) => void; readonly failed?: (err: AgentError) => void; readonly maxTurns?: number; readonly exhausted?: () => void }) {
    this.#upstream = upstream;
    this.#episode = episode;
    this.#report = hooks.report;
    this.#failed = hooks.failed;
    this.#maxTurns = hooks.maxTurns ?? Infinity;
    this.#exhausted = hooks.exhausted;
  }

  /** Model calls answered so far. */
  get turns(): number {
    return this.#turns;
  }

  /** Segments the episode's turns fell into. */
  get segments(): number {
    return this.#segments.length;
  }

  /** The model name the program must ask for. */
  get model(): string {
    return this.#upstream.kind === 'tokens' ? this.#upstream.chat.server.model : this.#upstream.model;
  }

  /** Answers a model call; calls in parallel (sub-agents) are answered in parallel, each in a segment no other call is extending. */
  async complete(call: ChatCall, signal: AbortSignal): Promise<ChatAnswer> {
    if (call.model !== this.model) throw new CaptureError(404, 'model_not_found', `The model '${call.model}' does not exist: this endpoint serves '${this.model}'`, 'model');
    if (this.#turns >= this.#maxTurns) {
      this.#exhausted?.();
      // A 400, not a 429: the SDKs retry a 429 themselves, and no retry can succeed.
      throw new CaptureError(400, 'turn_limit_reached', `this episode has had its ${this.#maxTurns} model calls (its turn limit): it is over`);
    }
    const t0 = performance.now();
    const n = this.#turns++;
    const id = `chatcmpl-${this.#episode}-${n}`;
    const created = Math.floor(Date.now() / 1000);
    try {
      return this.#upstream.kind === 'tokens' ? await this.#tokens(this.#upstream.chat, call, n, id, created, t0, signal) : await this.#text(this.#upstream, call, id, created, t0, signal);
    } catch (err) {
      if (err instanceof CaptureError || signal.aborted) throw err;
      const failure = isAgentError(err) ? err : new AgentError('LLM_UNAVAILABLE', `the inference server failed: ${err instanceof Error ? err.message : String(err)}`);
      this.#report({ provider: 'openai', model: this.model, duration_ms: performance.now() - t0, input_tokens: 0, output_tokens: 0, error: failure.message });
      this.#failed?.(failure);
      throw new CaptureError(502, 'upstream_error', failure.message);
    }
  }

  async #tokens(chat: TokenChat, call: ChatCall, n: number, id: string, created: number, t0: number, signal: AbortSignal): Promise<ChatAnswer> {
    const seen = call.messages.map((m) => JSON.stringify(m));
    const tools = JSON.stringify(call.tools);
    const segment = await this.#segmentFor(chat, call, seen, tools, signal);
    try {
      return await this.#generate(chat, segment, seen, n, id, created, t0, signal);
    } catch (err) {
      segment.spent = true;
      throw err;
    } finally {
      segment.busy = false;
    }
  }

  async #generate(chat: TokenChat, segment: Segment, seen: readonly string[], n: number, id: string, created: number, t0: number, signal: AbortSignal): Promise<ChatAnswer> {
    try {
      chat.checkLimit(segment.transcript, `episode ${this.#episode}, segment ${segment.index}`);
    } catch (err) {
      if (isAgentError(err)) throw new CaptureError(400, 'context_length_exceeded', err.message, 'messages');
      throw err;
    }
    const { parsed, tokens, completion } = await chat.generate(segment.transcript, chat.seedFor(this.#episode, n), signal);
    const turn = segment.index > 0 ? { ...tokens, segment: segment.index } : tokens;
    this.#report({ provider: 'openai', model: completion.model, duration_ms: performance.now() - t0, input_tokens: tokens.prompt_length, output_tokens: completion.token_ids.length, tokens: turn });
    const toolCalls: WireToolCall[] = parsed.calls.map((c, i) => ({ id: `call_${this.#episode}_${n}_${i}`, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } }));
    const content = parsed.invalid !== undefined ? completion.text : parsed.content;
    // The reply as the program will send it back: what extends this segment next time.
    segment.messages = [...seen, JSON.stringify(assistantMessage(content, toolCalls))];
    return {
      id,
      created,
      model: completion.model,
      content: content === '' && toolCalls.length > 0 ? null : content,
      toolCalls,
      finishReason: toolCalls.length > 0 ? 'tool_calls' : completion.finish_reason === 'length' ? 'length' : 'stop',
      usage: { prompt_tokens: tokens.prompt_length, completion_tokens: completion.token_ids.length, total_tokens: tokens.prompt_length + completion.token_ids.length },
    };
  }

  /** The segment a request continues (its messages extend the segment's, with the same tools), taken for it; or a new one rendered from the whole prompt. */
  async #segmentFor(chat: TokenChat, call: ChatCall, seen: readonly string[], tools: string, signal: AbortSignal): Promise<Segment> {
    for (let i = this.#segments.length - 1; i >= 0; i--) {
      const s = this.#segments[i] as Segment;
      if (s.busy || s.spent || s.tools !== tools || seen.length <= s.messages.length || !s.messages.every((m, k) => m === seen[k])) continue;
      const added = call.messages.slice(s.messages.length);
      // A message the program wrote as the assistant's was not generated here: it cannot extend the sequence as it was sampled.
      if (added.some((m) => m.role === 'assistant')) continue;
      s.busy = true;
      try {
        await chat.extend(s.transcript, added, signal);
      } catch (err) {
        // Nothing was appended (the render failed): the segment stays as it was.
        s.busy = false;
        throw err;
      }
      return s;
    }
    const transcript = new TokenTranscript();
    transcript.addEnv(await chat.server.render(call.messages, { tools: call.tools, addGenerationPrompt: true }, signal));
    const segment: Segment = { transcript, index: this.#segments.length, tools, messages: [], busy: true, spent: false };
    this.#segments.push(segment);
    return segment;
  }

  async #text(upstream: Extract<CaptureUpstream, { kind: 'text' }>, call: ChatCall, id: string, created: number, t0: number, signal: AbortSignal): Promise<ChatAnswer> {
    const body = { ...call.upstreamBody, model: upstream.model, stream: false };
    delete (body as Record<string, unknown>)['stream_options'];
    const res = await fetch(`${upstream.baseURL.replace(/\/$/, '')}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...(upstream.apiKey ? { authorization: `Bearer ${upstream.apiKey}` } : {}) }, body: JSON.stringify(body), signal });
    const answer = (await res.json().catch(() => null)) as JsonObject | null;
    if (!res.ok || !answer) throw new CaptureError(502, 'upstream_error', `the inference server at ${upstream.baseURL} answered ${res.status}: ${JSON.stringify(answer?.['error'] ?? answer).slice(0, 300)}`);
    const choice = (answer['choices'] as JsonObject[] | undefined)?.[0];
    const message = (choice?.['message'] ?? {}) as JsonObject;
    const usage = (answer['usage'] ?? {}) as JsonObject;
    const input = Number(usage['prompt_tokens'] ?? 0);
    const output = Number(usage['completion_tokens'] ?? 0);
    this.#report({ provider: 'openai', model: upstream.model, duration_ms: performance.now() - t0, input_tokens: input, output_tokens: output });
    const toolCalls = ((message['tool_calls'] ?? []) as unknown as WireToolCall[]).map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.function.name, arguments: c.function.arguments } }));
    const finish = choice?.['finish_reason'];
    return { id, created, model: upstream.model, content: typeof message['content'] === 'string' ? message['content'] : null, toolCalls, finishReason: finish === 'tool_calls' || finish === 'length' ? finish : 'stop', usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output } };
  }
}

/** A reply as the template (and the comparison with the next request) takes it. */
function assistantMessage(content: string, calls: readonly WireToolCall[]): TemplateMessage {
  return { role: 'assistant', content, ...(calls.length > 0 ? { tool_calls: calls.map(templateCall) } : {}) };
}

/** A wire call as the template takes it (arguments as an object; what cannot be read as one, as `{}`). */
export function templateCall(c: WireToolCall): TemplateToolCall {
  let args: JsonValue;
  try {
    args = JSON.parse(c.function.arguments) as JsonValue;
  } catch {
    args = {};
  }
  return { type: 'function', function: { name: c.function.name, arguments: args !== null && typeof args === 'object' && !Array.isArray(args) ? args : {} } };
}

/** A Chat Completions body checked and normalised (messages as the template takes them); a bad one is a 400 naming the field. */
export function chatCall(body: unknown): ChatCall {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new CaptureError(400, 'invalid_request_error', 'the request body must be a JSON object');
  const b = body as JsonObject;
  if (typeof b['model'] !== 'string') throw new CaptureError(400, 'invalid_request_error', "'model' must be a string", 'model');
  if (!Array.isArray(b['messages']) || b['messages'].length === 0) throw new CaptureError(400, 'invalid_request_error', "'messages' must be a non-empty array", 'messages');
  const messages = b['messages'].map((m, i) => templateMessage(m, `messages[${i}]`));
  const tools = b['tools'] === undefined ? [] : Array.isArray(b['tools']) ? b['tools'].map((t, i) => wireTool(t, `tools[${i}]`)) : badRequest("'tools' must be an array", 'tools');
  const options = b['stream_options'];
  return { model: b['model'], messages, tools, stream: b['stream'] === true, includeUsage: options !== null && typeof options === 'object' && !Array.isArray(options) && options['include_usage'] === true, upstreamBody: b };
}

function templateMessage(m: JsonValue, where: string): TemplateMessage {
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return badRequest(`${where} must be an object`, where);
  const role = m['role'];
  switch (role) {
    case 'system':
    case 'developer':
      return { role: 'system', content: contentText(m['content'], `${where}.content`) };
    case 'user':
      return { role: 'user', content: contentText(m['content'], `${where}.content`) };
    case 'assistant': {
      const calls = m['tool_calls'];
      if (calls !== undefined && calls !== null && !Array.isArray(calls)) return badRequest(`${where}.tool_calls must be an array`, `${where}.tool_calls`);
      const list = (calls ?? []).map((c, i) => {
        const f = c !== null && typeof c === 'object' && !Array.isArray(c) ? c['function'] : undefined;
        if (f === null || typeof f !== 'object' || Array.isArray(f) || typeof f['name'] !== 'string' || typeof f['arguments'] !== 'string') return badRequest(`${where}.tool_calls[${i}] needs function.name and function.arguments (a JSON string)`, `${where}.tool_calls`);
        return templateCall({ id: '', type: 'function', function: { name: f['name'], arguments: f['arguments'] } });
      });
      return { role: 'assistant', content: contentText(m['content'], `${where}.content`), ...(list.length > 0 ? { tool_calls: list } : {}) };
    }
    case 'tool':
      if (typeof m['tool_call_id'] !== 'string') return badRequest(`${where}.tool_call_id must be a string`, `${where}.tool_call_id`);
      return { role: 'tool', content: contentText(m['content'], `${where}.content`), tool_call_id: m['tool_call_id'] };
    default:
      return badRequest(`${where}.role must be system, developer, user, assistant or tool (got ${JSON.stringify(role)})`, `${where}.role`);
  }
}

function wireTool(t: JsonValue, where: string): OpenAiTool {
  const f = t !== null && typeof t === 'object' && !Array.isArray(t) && t['type'] === 'function' ? t['function'] : undefined;
  if (f === null || typeof f !== 'object' || Array.isArray(f) || typeof f['name'] !== 'string') return badRequest(`${where} must be {"type": "function", "function": {"name", "parameters"}}`, where);
  const params = f['parameters'];
  return { type: 'function', function: { name: f['name'], ...(typeof f['description'] === 'string' ? { description: f['description'] } : {}), parameters: (params !== null && typeof params === 'object' && !Array.isArray(params) ? params : { type: 'object' }) as OpenAiTool['function']['parameters'] } };
}

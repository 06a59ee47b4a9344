/**
 * A chat model in token mode: each episode's conversation is one token sequence (see
 * token-transcript.ts), each turn a `/v1/completions` from the whole sequence, its tool calls read
 * from the generated text by a vLLM-named parser. The caller keeps its conversation as chat
 * messages (what conversations.jsonl shows); what the model saw and produced is in each turn's
 * {@link TokenTurn}.
 */
import { raceAbort } from '../shared/abort.js';
import { AgentError } from '../shared/errors.js';
import { hashSeed } from '../shared/rng.js';
import { openAiTool, type ChatMessage, type ToolCall, type ToolSpec } from './client.js';
import { toolParser, TOOL_PARSERS, type ParsedTurn, type ToolParser } from './tool-parsers.js';
import { TemplateShape, TokenTranscript, type TokenTurn } from './token-transcript.js';
import { VllmServer, type Completion, type SamplingSettings, type TemplateMessage } from './vllm.js';

/** How a run generates in token mode: the server, the sampling settings, the tool parser, the context limit. */
export interface TokenModeOptions {
  /** The server's OpenAI base URL (`http://host:8000/v1`). */
  readonly baseURL: string;
  readonly model: string;
  readonly apiKey?: string;
  readonly sampling: SamplingSettings;
  /** Each request's seed is drawn from this one, the episode and the turn: reruns sample alike, the trials of a task do not. */
  readonly seed: number;
  /** A vLLM tool parser name: `hermes` (default) or `llama3_json`. */
  readonly toolParser?: string;
  /** Tokens at most in an episode's sequence (default: the server's `max_model_len`). */
  readonly maxContext?: number;
  /** The weights' version the trainer last declared: a turn the server does not label is labelled with it. */
  readonly weightVersion?: () => number | undefined;
  /** Awaited before each completion is sent (a paused rollouts socket holds it there while the trainer pushes weights). */
  readonly beforeGenerate?: (signal?: AbortSignal) => Promise<void>;
  /** Servers already checked, shared by the token chats of one long-lived owner (an `agent serve`): each is checked and its template learned once. */
  readonly servers?: TokenServers;
}

/**
 * Inference servers probed once and shared, by base URL and model: `agent serve`'s rollouts
 * requests (one a training step) would otherwise each check the server's routes and learn its
 * template again, a generation among them, before their first episode. A server that failed its
 * check is checked again on the next use. One per owner, never process-wide: a server restarted
 * on the same URL (a test's next fake on a reused port) must be checked again by the next owner.
 */
export class TokenServers {
  readonly #connected = new Map<string, Promise<{ readonly server: VllmServer; readonly shape: TemplateShape }>>();

  connect(options: Pick<TokenModeOptions, 'baseURL' | 'model' | 'apiKey'>, signal?: AbortSignal): Promise<{ readonly server: VllmServer; readonly shape: TemplateShape }> {
    const key = `${options.baseURL}\u0000${options.model}\u0000${options.apiKey ?? ''}`;
    let connected = this.#connected.get(key);
    if (!connected) {
      // Not bound to the first caller's signal: a request cancelled while the probe runs must not fail the others waiting on it.
      connected = VllmServer.connect({ baseURL: options.baseURL, model: options.model, ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}) }).then(async (server) => ({ server, shape: await TemplateShape.learn(server) }));
      this.#connected.set(key, connected);
      connected.catch(() => this.#connected.delete(key));
    }
    return raceAbort(connected, signal);
  }
}

/** A generated turn: what the caller's conversation keeps, and its tokens. */
export interface TokenChatTurn {
  /** The content (the text before its calls); all of the text when it is invalid. */
  readonly text: string;
  readonly toolCalls: readonly ToolCall[];
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly tokens: TokenTurn;
}

/** A gold turn: what a perfect agent says (text) and calls, rendered as the model's turn instead of generated. */
export interface GoldTurn {
  readonly text?: string;
  readonly calls?: readonly Pick<ToolCall, 'name' | 'arguments'>[];
}

interface Episode {
  readonly transcript: TokenTranscript;
  /** Messages of the caller's conversation already in the sequence. */
  consumed: number;
}

export class TokenChat {
  readonly server: VllmServer;
  readonly #shape: TemplateShape;
  readonly #parser: ToolParser;
  readonly #options: TokenModeOptions;
  readonly #limit: number;
  readonly #episodes = new Map<number, Episode>();

  private constructor(server: VllmServer, shape: TemplateShape, parser: ToolParser, options: TokenModeOptions) {
    this.server = server;
    this.#shape = shape;
    this.#parser = parser;
    this.#options = options;
    this.#limit = Math.min(server.maxModelLen, options.maxContext ?? Number.MAX_SAFE_INTEGER);
  }

  /** Checks the server (see {@link VllmServer.connect}) and learns its template's shape, before any episode. */
  static async open(options: TokenModeOptions, signal?: AbortSignal): Promise<TokenChat> {
    const name = options.toolParser ?? 'hermes';
    const parser = toolParser(name);
    if (!parser) throw new AgentError('BAD_USAGE', `unknown tool parser '${name}'`, { hint: `Pass --tool-parser ${Object.keys(TOOL_PARSERS).join(' or ')} (vLLM's names).` });
    if (!Number.isInteger(options.sampling.max_tokens) || options.sampling.max_tokens < 1) throw new AgentError('BAD_USAGE', `max-tokens must be a whole number ≥ 1 (got ${options.sampling.max_tokens})`);
    if (options.maxContext !== undefined && (!Number.isInteger(options.maxContext) || options.maxContext <= options.sampling.max_tokens)) {
      throw new AgentError('BAD_USAGE', `max-context (${options.maxContext}) must be a whole number above max-tokens (${options.sampling.max_tokens})`, { hint: 'Pass a larger --max-context, or a smaller --max-tokens.' });
    }
    if (options.servers) {
      const { server, shape } = await options.servers.connect(options, signal);
      return new TokenChat(server, shape, parser, options);
    }
    const server = await VllmServer.connect({ baseURL: options.baseURL, model: options.model, ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}) }, signal);
    return new TokenChat(server, await TemplateShape.learn(server, signal), parser, options);
  }

  /** The context limit in force: the server's, or `maxContext` when smaller. */
  get limit(): number {
    return this.#limit;
  }

  /**
   * The next turn of `episode`: the messages of `messages` not yet in its sequence (the first
   * prompt; then tool results and user turns) are rendered by the template and appended, then the
   * model generates from the whole sequence — or, given a `gold` turn, the turn is that text and
   * those calls as the template renders an assistant's turn (a gold episode as token-exact
   * training data).
   */
  async turn(episode: number, request: { readonly system?: string; readonly messages: readonly ChatMessage[]; readonly tools: readonly ToolSpec[]; readonly signal?: AbortSignal; readonly gold?: GoldTurn }): Promise<TokenChatTurn> {
    const { signal } = request;
    const transcript = await this.#transcript(episode, request);
    this.checkLimit(transcript, `episode ${episode}`);
    const seed = this.seedFor(episode, transcript.turns.length);
    const n = transcript.turns.length + 1;
    const version = this.#options.weightVersion?.();
    if (request.gold) {
      const text = request.gold.text ?? '';
      const calls = (request.gold.calls ?? []).map((c, i) => ({ id: `call_${episode}_${n}_${i}`, name: c.name, arguments: c.arguments }));
      const message = { role: 'assistant' as const, content: text, ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) } : {}) };
      const ids = await this.#shape.assistantIds(this.server, message, signal);
      const tokens = transcript.addTurn({ token_ids: ids, logprobs: [], text, finish_reason: 'stop', stop_reason: null, model: this.server.model }, seed, { gold: true, sampling: this.#sampling(), ...(version !== undefined ? { weightVersion: version } : {}) });
      return { text, toolCalls: calls, inputTokens: tokens.prompt_length, outputTokens: ids.length, tokens };
    }
    const { parsed, tokens, completion } = await this.generate(transcript, seed, signal);
    return {
      text: parsed.invalid !== undefined ? completion.text : parsed.content,
      toolCalls: parsed.calls.map((c, i) => ({ id: `call_${episode}_${n}_${i}`, name: c.name, arguments: c.arguments })),
      inputTokens: tokens.prompt_length,
      outputTokens: completion.token_ids.length,
      tokens,
    };
  }

  /** The episode's sequence with the messages not yet in it appended (the whole first prompt on its first turn). */
  async #transcript(episode: number, request: { readonly system?: string; readonly messages: readonly ChatMessage[]; readonly tools: readonly ToolSpec[]; readonly signal?: AbortSignal }): Promise<TokenTranscript> {
    const { signal } = request;
    const ep = this.#episodes.get(episode);
    if (!ep) {
      const transcript = new TokenTranscript();
      const first = [...(request.system ? [{ role: 'system' as const, content: request.system }] : []), ...request.messages.map(templateMessage)];
      transcript.addEnv(await this.server.render(first, { tools: request.tools.map(openAiTool), addGenerationPrompt: true }, signal));
      this.#episodes.set(episode, { transcript, consumed: request.messages.length });
      return transcript;
    }
    // The caller's own record of our turns is skipped: those ids are in the sequence as generated.
    const added = request.messages.slice(ep.consumed).filter((m) => m.role !== 'assistant');
    ep.consumed = request.messages.length;
    await this.extend(ep.transcript, added.map(templateMessage), signal);
    return ep.transcript;
  }

  /**
   * Appends what follows the last generated turn: the rest of its closing the model did not
   * generate, then `messages` (tool results, a user's turn) as the template renders them after it,
   * and the generation prompt. Generated ids are never re-encoded.
   */
  async extend(transcript: TokenTranscript, messages: readonly TemplateMessage[], signal?: AbortSignal): Promise<void> {
    const last = transcript.turns[transcript.turns.length - 1];
    const rest = last ? this.#shape.rest(last.token_ids) : [];
    const rendered = messages.length > 0 ? await this.#shape.render(this.server, messages, signal) : { ids: [] };
    transcript.addEnv([...rest, ...rendered.ids], rendered.drift);
  }

  /** How every turn is sampled, and the seed their seeds are drawn from (a token record's `sampling`). */
  #sampling(): NonNullable<TokenTurn['sampling']> {
    const { temperature, top_p, max_tokens } = this.#options.sampling;
    return { temperature, top_p, max_tokens, seed: this.#options.seed };
  }

  /** The sampling seed of an episode's n-th turn (from 0): reruns sample alike, the trials of a task do not. */
  seedFor(episode: number, n: number): number {
    return hashSeed(this.#options.seed, 'sampling', episode, n);
  }

  /** Refuses a generation from `transcript` that would pass the context limit (CONTEXT_LIMIT, naming `what`). */
  checkLimit(transcript: TokenTranscript, what: string): void {
    const { max_tokens } = this.#options.sampling;
    if (transcript.length + max_tokens <= this.#limit) return;
    throw new AgentError('CONTEXT_LIMIT', `${what}'s prompt is ${transcript.length} tokens: with max_tokens ${max_tokens} it would pass the context limit of ${this.#limit} (${this.#limit === this.server.maxModelLen ? "the server's max_model_len" : '--max-context'})`, {
      hint: 'The episode ends truncated here; raise the limit (the server\'s --max-model-len, or --max-context) or lower --max-tokens for longer episodes.',
    });
  }

  /** Generates from `transcript`'s whole sequence with `seed`: the turn is appended as generated, its text read by the tool parser. */
  async generate(transcript: TokenTranscript, seed: number, signal?: AbortSignal): Promise<{ readonly completion: Completion; readonly parsed: ParsedTurn; readonly tokens: TokenTurn }> {
    await this.#options.beforeGenerate?.(signal);
    // Read after the gate: a turn held through a weight push is generated, and labelled, with the new weights.
    const version = this.#options.weightVersion?.();
    const completion = await this.server.complete(transcript.ids, this.#options.sampling, seed, signal);
    const parsed = this.#parser(completion.text);
    const tokens = transcript.addTurn(completion, seed, { sampling: this.#sampling(), ...(parsed.invalid !== undefined ? { invalid: parsed.invalid } : {}), ...(version !== undefined ? { weightVersion: version } : {}) });
    return { completion, parsed, tokens };
  }

  /** Forget an episode's sequence (its turns are recorded already). */
  end(episode: number): void {
    this.#episodes.delete(episode);
  }
}

function templateMessage(m: ChatMessage): TemplateMessage {
  if (m.role === 'tool') return { role: 'tool', content: m.content, tool_call_id: m.toolCallId };
  return { role: m.role, content: m.content };
}

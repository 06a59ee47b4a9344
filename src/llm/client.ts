/**
 * One small chat interface over the official SDKs: Anthropic's Messages API and any
 * OpenAI-compatible `/v1/chat/completions` server (OpenAI, vLLM, Ollama, …). Shared by the LLM
 * reward judge and, later, the LLM policy and simulated user. Retries of 429, 5xx and connection
 * errors (honouring `retry-after`) are the SDKs' own; every call takes an AbortSignal.
 */
import { AgentError, describeError, oneLine } from '../shared/errors.js';
import type { JsonObject } from '../shared/json.js';
import type { LlmProvider } from '../schema/judge-config.js';
import type { TokenTurn } from '../events/env-events.js';

/** A conversation turn. An assistant turn may call tools; each call is answered by a `tool` turn with its id. */
export type ChatMessage =
  | { readonly role: 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly toolCalls?: readonly ToolCall[] }
  | { readonly role: 'tool'; readonly toolCallId: string; readonly content: string };

export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: JsonObject;
}

/** A JSON Schema of an object, such as a tool's arguments (never a boolean schema). */
export type ObjectSchema = { readonly [keyword: string]: unknown };

/** A tool the model may call: its name, what it does, and a JSON Schema of its arguments. */
export interface ToolSpec {
  readonly name: string;
  readonly description?: string;
  readonly parameters: ObjectSchema;
}

/** A tool in OpenAI's function-tool form, as OpenAI-compatible servers (and vLLM's /tokenize) take it. */
export interface OpenAiTool {
  readonly type: 'function';
  readonly function: { readonly name: string; readonly description?: string; readonly parameters: ObjectSchema };
}

export function openAiTool(spec: ToolSpec): OpenAiTool {
  return { type: 'function', function: { name: spec.name, ...(spec.description !== undefined ? { description: spec.description } : {}), parameters: spec.parameters } };
}

/** What a policy or judge asks a model: a system prompt, the messages, tools, a token limit, the temperature, and an abort signal. */
export interface ChatRequest {
  readonly system?: string;
  readonly messages: readonly ChatMessage[];
  readonly tools?: readonly ToolSpec[];
  readonly maxTokens: number;
  readonly temperature?: number;
  readonly signal?: AbortSignal;
}

/** A model's answer: its text, its tool calls, and the tokens it used. */
export interface ChatResponse {
  readonly text: string;
  readonly toolCalls: readonly ToolCall[];
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** A chat model behind one provider (OpenAI-compatible, Anthropic, or the embedded default), as policies and judges call it. */
export interface LlmClient {
  readonly provider: LlmProvider;
  readonly model: string;
  chat(request: ChatRequest): Promise<ChatResponse>;
}

/** One model call as a run reports it: `llm_call` events, `chat <model>` spans, token metrics. */
export interface LlmCallReport {
  readonly provider: LlmProvider;
  readonly model: string;
  readonly duration_ms: number;
  readonly input_tokens: number;
  readonly output_tokens: number;
  /** Why the call failed (after the SDK's own retries). */
  readonly error?: string;
  /** Token mode: the turn's ids, logprobs and the environment's ids before it. */
  readonly tokens?: TokenTurn;
}

/** `client.chat`, timed, its outcome handed to `report` (a failed call too, then rethrown). */
export async function reportedChat(client: LlmClient, request: ChatRequest, report: ((call: LlmCallReport) => void) | undefined): Promise<ChatResponse> {
  const t0 = performance.now();
  const base = { provider: client.provider, model: client.model };
  try {
    const res = await client.chat(request);
    report?.({ ...base, duration_ms: performance.now() - t0, input_tokens: res.inputTokens, output_tokens: res.outputTokens });
    return res;
  } catch (err) {
    report?.({ ...base, duration_ms: performance.now() - t0, input_tokens: 0, output_tokens: 0, error: oneLine(describeError(err)) });
    throw err;
  }
}

/** Which model a client talks to: provider, model, base URL, the variable holding its API key, retries and timeout. */
export interface LlmClientOptions {
  readonly provider: LlmProvider;
  readonly model: string;
  readonly baseURL?: string;
  /** The environment variable holding the key. Required for the providers' own APIs; a local server (base URL given) may do without. */
  readonly apiKeyEnv: string;
  readonly maxRetries: number;
  /** Per request, including the SDK's retries. */
  readonly timeoutMs?: number;
}

/** Creates the client for a provider; the embedded default needs no server. */
export async function createLlmClient(options: LlmClientOptions): Promise<LlmClient> {
  const key = process.env[options.apiKeyEnv];
  if (!key && options.baseURL === undefined) {
    throw new AgentError('BAD_USAGE', `the ${options.provider} model '${options.model}' needs an API key in $${options.apiKeyEnv}, which is not set`, {
      hint: `Export ${options.apiKeyEnv}, name another variable with api_key_env, or point base_url at a local server.`,
    });
  }
  const common = { apiKey: key || 'none', maxRetries: options.maxRetries, ...(options.baseURL !== undefined ? { baseURL: options.baseURL } : {}), ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}) };
  if (options.provider === 'anthropic') {
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    const client = new Anthropic(common);
    return {
      provider: 'anthropic',
      model: options.model,
      async chat(req) {
        const res = await client.messages.create(
          {
            model: options.model,
            max_tokens: req.maxTokens,
            messages: anthropicMessages(req.messages),
            ...(req.system !== undefined ? { system: req.system } : {}),
            ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
            ...(req.tools && req.tools.length > 0 ? { tools: req.tools.map((t) => ({ name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), input_schema: t.parameters as { type: 'object' } })) } : {}),
          },
          req.signal ? { signal: req.signal } : {},
        );
        const text = res.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
        const toolCalls = res.content.flatMap((b) => (b.type === 'tool_use' ? [{ id: b.id, name: b.name, arguments: (b.input ?? {}) as JsonObject }] : []));
        return { text, toolCalls, inputTokens: res.usage.input_tokens, outputTokens: res.usage.output_tokens };
      },
    };
  }
  const { default: OpenAI } = await import('openai');
  const client = new OpenAI(common);
  return {
    provider: 'openai',
    model: options.model,
    async chat(req) {
      const res = await client.chat.completions.create(
        {
          model: options.model,
          max_tokens: req.maxTokens,
          messages: [...(req.system !== undefined ? [{ role: 'system' as const, content: req.system }] : []), ...openaiMessages(req.messages)],
          ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
          ...(req.tools && req.tools.length > 0 ? { tools: req.tools.map(openAiTool) } : {}),
        },
        req.signal ? { signal: req.signal } : {},
      );
      const message = res.choices[0]?.message;
      const toolCalls = (message?.tool_calls ?? []).flatMap((c) => (c.type === 'function' ? [{ id: c.id, name: c.function.name, arguments: parseArguments(c.function.arguments) }] : []));
      return { text: message?.content ?? '', toolCalls, inputTokens: res.usage?.prompt_tokens ?? 0, outputTokens: res.usage?.completion_tokens ?? 0 };
    },
  };
}

/** A model's tool arguments are text: malformed JSON is kept visible to the env (which will refuse it) rather than thrown. */
function parseArguments(text: string): JsonObject {
  try {
    const v = JSON.parse(text || '{}') as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonObject) : { _arguments: text };
  } catch {
    return { _arguments: text };
  }
}

type AnthropicBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: JsonObject } | { type: 'tool_result'; tool_use_id: string; content: string };

/** Anthropic's shape: tool calls are blocks of the assistant turn, and their results blocks of the next user turn. */
function anthropicMessages(messages: readonly ChatMessage[]): { role: 'user' | 'assistant'; content: string | AnthropicBlock[] }[] {
  const out: { role: 'user' | 'assistant'; content: string | AnthropicBlock[] }[] = [];
  for (const m of messages) {
    if (m.role === 'tool') {
      const block: AnthropicBlock = { type: 'tool_result', tool_use_id: m.toolCallId, content: m.content };
      const last = out[out.length - 1];
      if (last?.role === 'user' && Array.isArray(last.content)) last.content.push(block);
      else out.push({ role: 'user', content: [block] });
    } else if (m.role === 'assistant' && m.toolCalls && m.toolCalls.length > 0) {
      out.push({ role: 'assistant', content: [...(m.content ? [{ type: 'text' as const, text: m.content }] : []), ...m.toolCalls.map((c) => ({ type: 'tool_use' as const, id: c.id, name: c.name, input: c.arguments }))] });
    } else out.push({ role: m.role, content: m.content });
  }
  return out;
}

function openaiMessages(messages: readonly ChatMessage[]): ({ role: 'user'; content: string } | { role: 'assistant'; content: string; tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[] } | { role: 'tool'; tool_call_id: string; content: string })[] {
  return messages.map((m) => {
    if (m.role === 'tool') return { role: 'tool' as const, tool_call_id: m.toolCallId, content: m.content };
    if (m.role === 'assistant' && m.toolCalls && m.toolCalls.length > 0) {
      return { role: 'assistant' as const, content: m.content, tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: JSON.stringify(c.arguments) } })) };
    }
    return { role: m.role, content: m.content } as { role: 'user'; content: string };
  });
}

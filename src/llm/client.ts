/**
 * One small chat interface over the official SDKs: Anthropic's Messages API and any
 * OpenAI-compatible `/v1/chat/completions` server (OpenAI, vLLM, Ollama, …). Shared by the LLM
 * reward judge and, later, the LLM policy and simulated user. Retries of 429, 5xx and connection
 * errors (honouring `retry-after`) are the SDKs' own; every call takes an AbortSignal.
 */
import { AgentError } from '../shared/errors.js';
import type { LlmProvider } from '../reward/judge-config.js';

export interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly content: string;
}

export interface ChatRequest {
  readonly system?: string;
  readonly messages: readonly ChatMessage[];
  readonly maxTokens: number;
  readonly temperature?: number;
  readonly signal?: AbortSignal;
}

export interface ChatResponse {
  readonly text: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

export interface LlmClient {
  readonly provider: LlmProvider;
  readonly model: string;
  chat(request: ChatRequest): Promise<ChatResponse>;
}

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
            messages: req.messages.map((m) => ({ role: m.role, content: m.content })),
            ...(req.system !== undefined ? { system: req.system } : {}),
            ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
          },
          req.signal ? { signal: req.signal } : {},
        );
        const text = res.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
        return { text, inputTokens: res.usage.input_tokens, outputTokens: res.usage.output_tokens };
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
          messages: [...(req.system !== undefined ? [{ role: 'system' as const, content: req.system }] : []), ...req.messages.map((m) => ({ role: m.role, content: m.content }))],
          ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
        },
        req.signal ? { signal: req.signal } : {},
      );
      return { text: res.choices[0]?.message.content ?? '', inputTokens: res.usage?.prompt_tokens ?? 0, outputTokens: res.usage?.completion_tokens ?? 0 };
    },
  };
}

/** The configuration of an LLM judge, as loaded from env.json `reward_sources.<name>.judge`. */
export type LlmProvider = 'anthropic' | 'openai';

/** A judge reward source's settings (judges/*.json): provider and model, the prompt template, token and retry limits, what a score out of range does, budget and prices. */
export interface JudgeConfig {
  readonly provider: LlmProvider;
  readonly model: string;
  /** Absolute path of the prompt template, and its text (read when the env loads). */
  readonly promptFile: string;
  readonly template: string;
  readonly system?: string;
  /** An OpenAI-compatible server (vLLM, Ollama, …) or an Anthropic-compatible endpoint. */
  readonly baseURL?: string;
  /** The environment variable that holds the API key. */
  readonly apiKeyEnv: string;
  readonly maxTokens: number;
  readonly temperature?: number;
  /** Retries of 429/5xx/connection errors, honouring `retry-after` (the SDKs' own retry). */
  readonly maxRetries: number;
  /** A score outside the source's range is clamped into it, or rejected (and re-asked once). */
  readonly outOfRange: 'clamp' | 'reject';
  /** Per run: no call is made once either is spent; the step's value then fails (and its fallback applies). */
  readonly budget?: { readonly tokens?: number; readonly usd?: number };
  /** USD per million tokens; overrides the built-in price table. */
  readonly price?: { readonly inputPerMTok: number; readonly outputPerMTok: number };
}

/**
 * An LLM judge as a reward source: fills the prompt template from the step (or the episode),
 * asks the model, reads a score out of its answer (re-asking once when there is none, or when it
 * is out of range and the source rejects such), and accounts tokens and money against the run's
 * budget. Transport retries (429/5xx, `retry-after`) are the SDK's; the source's own retry policy
 * wraps the whole judgement.
 */
import { createLlmClient, reportedChat, type ChatMessage, type LlmCallReport, type LlmClient } from '../llm/client.js';
import { costOf, priceOf, type Price } from '../llm/prices.js';
import type { JsonSchema } from '../schema/ajv.js';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { fillTemplate } from '../schema/judge-template.js';
import type { JudgeConfig } from '../schema/judge-config.js';
import type { CallCost } from '../events/env-events.js';

/** The range a score must fall in, read from the source's value schema. */
export function rangeOf(schema: JsonSchema): { readonly min: number; readonly max: number } {
  const s = typeof schema === 'object' ? schema : {};
  const num = (k: string): number | undefined => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
  return { min: num('minimum') ?? num('exclusiveMinimum') ?? -Infinity, max: num('maximum') ?? num('exclusiveMaximum') ?? Infinity };
}

const NUMBER = /[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/g;

/**
 * The score in a model's answer: a number labelled `score` if there is one, else the last number
 * (judges reason first and conclude last). undefined when there is none.
 */
export function parseScore(text: string): number | undefined {
  const labelled = /score[^\d+\-.]{0,12}([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)/i.exec(text);
  const pick = labelled?.[1] ?? [...text.matchAll(NUMBER)].pop()?.[0];
  if (pick === undefined) return undefined;
  const n = Number(pick);
  return Number.isFinite(n) ? n : undefined;
}

export interface JudgeStats {
  calls: number;
  failed: number;
  reasked: number;
  input_tokens: number;
  output_tokens: number;
  /** null when the model's price is unknown. */
  cost_usd: number | null;
  budget_exhausted: number;
}

export interface JudgeVars {
  readonly [name: string]: JsonValue | undefined;
}

export class LlmJudge {
  readonly #config: JudgeConfig;
  readonly #range: { readonly min: number; readonly max: number };
  readonly #price: Price | undefined;
  readonly #source: string;
  #client: Promise<LlmClient> | undefined;
  readonly stats: JudgeStats;

  constructor(source: string, config: JudgeConfig, valueSchema: JsonSchema) {
    this.#source = source;
    this.#config = config;
    this.#range = rangeOf(valueSchema);
    this.#price = priceOf(config.model, config.price);
    this.stats = { calls: 0, failed: 0, reasked: 0, input_tokens: 0, output_tokens: 0, cost_usd: this.#price ? 0 : null, budget_exhausted: 0 };
    // Found now, when the env opens, rather than as a failure on every step.
    if (!process.env[config.apiKeyEnv] && config.baseURL === undefined) {
      throw new AgentError('BAD_USAGE', `reward source '${source}': the ${config.provider} judge needs an API key in $${config.apiKeyEnv}, which is not set`, {
        hint: `Export ${config.apiKeyEnv}, name another variable with api_key_env, or point base_url at a local server.`,
      });
    }
    if (config.budget?.usd !== undefined && !this.#price) {
      throw new AgentError('DEFINITION_INVALID', `reward source '${source}': a USD budget needs the price of '${config.model}', which the built-in table does not know`, {
        hint: 'Add "price": {"input_per_mtok": …, "output_per_mtok": …} to the judge, or budget in tokens.',
      });
    }
  }

  /** The score, and what the calls for it cost. */
  async judge(vars: JudgeVars, signal: AbortSignal, report?: (call: LlmCallReport) => void): Promise<{ value: number; cost: CallCost }> {
    this.#checkBudget();
    this.#client ??= createLlmClient({ provider: this.#config.provider, model: this.#config.model, apiKeyEnv: this.#config.apiKeyEnv, maxRetries: this.#config.maxRetries, ...(this.#config.baseURL !== undefined ? { baseURL: this.#config.baseURL } : {}) });
    const client = await this.#client;
    const { min, max } = this.#range;
    const prompt = fillTemplate(this.#config.template, { ...vars, min: Number.isFinite(min) ? min : null, max: Number.isFinite(max) ? max : null, source: this.#source });
    const messages: ChatMessage[] = [{ role: 'user', content: prompt }];
    const cost = { input_tokens: 0, output_tokens: 0, usd: this.#price ? 0 : null };
    for (let attempt = 0; ; attempt++) {
      const text = await this.#ask(client, messages, signal, cost, report);
      const score = parseScore(text);
      const inRange = score !== undefined && score >= min && score <= max;
      if (score !== undefined && (inRange || this.#config.outOfRange === 'clamp')) return { value: Math.min(max, Math.max(min, score)), cost };
      if (attempt === 1) {
        throw new AgentError('TOOL_MALFORMED_OUTPUT', `judge '${this.#source}' gave no usable score twice (last answer: ${JSON.stringify(text.slice(0, 200))})`, {
          hint: 'Make the prompt ask for a single number in range; or set out_of_range to "clamp".',
        });
      }
      this.stats.reasked++;
      this.#checkBudget();
      messages.push({ role: 'assistant', content: text || '(empty)' }, { role: 'user', content: `Answer with the score only: one number from ${min} to ${max}.` });
    }
  }

  async #ask(client: LlmClient, messages: readonly ChatMessage[], signal: AbortSignal, cost: { input_tokens: number; output_tokens: number; usd: number | null }, report: ((call: LlmCallReport) => void) | undefined): Promise<string> {
    this.stats.calls++;
    try {
      const request = {
        messages,
        maxTokens: this.#config.maxTokens,
        signal,
        ...(this.#config.system !== undefined ? { system: this.#config.system } : {}),
        ...(this.#config.temperature !== undefined ? { temperature: this.#config.temperature } : {}),
      };
      const res = await reportedChat(client, request, report);
      this.stats.input_tokens += res.inputTokens;
      this.stats.output_tokens += res.outputTokens;
      const usd = costOf(this.#price, res.inputTokens, res.outputTokens);
      if (usd !== undefined && this.stats.cost_usd !== null) this.stats.cost_usd += usd;
      cost.input_tokens += res.inputTokens;
      cost.output_tokens += res.outputTokens;
      if (usd !== undefined && cost.usd !== null) cost.usd += usd;
      return res.text;
    } catch (err) {
      this.stats.failed++;
      throw err;
    }
  }

  /** Calls already in flight may overshoot the budget by their own cost; no new call starts once it is spent. */
  #checkBudget(): void {
    const b = this.#config.budget;
    if (!b) return;
    const tokens = this.stats.input_tokens + this.stats.output_tokens;
    const spent = (b.tokens !== undefined && tokens >= b.tokens) || (b.usd !== undefined && (this.stats.cost_usd ?? 0) >= b.usd);
    if (spent) {
      this.stats.budget_exhausted++;
      throw new AgentError('BAD_USAGE', `judge '${this.#source}' has spent its budget (${tokens} tokens, $${(this.stats.cost_usd ?? 0).toFixed(4)})`, {
        hint: 'Raise the judge budget in env.json, or judge fewer steps with `when`.',
      });
    }
  }
}

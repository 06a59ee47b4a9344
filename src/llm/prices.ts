/**
 * USD per million tokens, by model-name prefix (longest prefix wins). Published list prices as of
 * late 2026; a judge's `price` in env.json overrides them, and a model not listed has no known
 * cost (its calls are counted, its money is not, and a USD budget needs an explicit price).
 */
export interface Price {
  readonly inputPerMTok: number;
  readonly outputPerMTok: number;
}

const TABLE: Readonly<Record<string, Price>> = {
  'claude-opus-4': { inputPerMTok: 15, outputPerMTok: 75 },
  'claude-opus-4-5': { inputPerMTok: 5, outputPerMTok: 25 },
  'claude-sonnet-4': { inputPerMTok: 3, outputPerMTok: 15 },
  'claude-3-7-sonnet': { inputPerMTok: 3, outputPerMTok: 15 },
  'claude-3-5-sonnet': { inputPerMTok: 3, outputPerMTok: 15 },
  'claude-haiku-4': { inputPerMTok: 1, outputPerMTok: 5 },
  'claude-3-5-haiku': { inputPerMTok: 0.8, outputPerMTok: 4 },
  'gpt-4o': { inputPerMTok: 2.5, outputPerMTok: 10 },
  'gpt-4o-mini': { inputPerMTok: 0.15, outputPerMTok: 0.6 },
  'gpt-4.1': { inputPerMTok: 2, outputPerMTok: 8 },
  'gpt-4.1-mini': { inputPerMTok: 0.4, outputPerMTok: 1.6 },
  'gpt-4.1-nano': { inputPerMTok: 0.1, outputPerMTok: 0.4 },
  'gpt-5': { inputPerMTok: 1.25, outputPerMTok: 10 },
  'gpt-5-mini': { inputPerMTok: 0.25, outputPerMTok: 2 },
};

export function priceOf(model: string, override?: Price): Price | undefined {
  if (override) return override;
  let best: string | undefined;
  for (const prefix of Object.keys(TABLE)) if (model.startsWith(prefix) && (best === undefined || prefix.length > best.length)) best = prefix;
  return best === undefined ? undefined : TABLE[best];
}

export function costOf(price: Price | undefined, inputTokens: number, outputTokens: number): number | undefined {
  return price ? (inputTokens * price.inputPerMTok + outputTokens * price.outputPerMTok) / 1e6 : undefined;
}

/**
 * Reads env.json `reward_sources`: where each declared reward source's values come from. A
 * source without an entry is reported by its tool when its `delay_ms` is 0, and delivered from
 * outside otherwise. Problems are issues with the manifest's JSON pointer, like every other
 * part of the definition.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { JudgeConfig } from './judge-config.js';
import { TEMPLATE_ROOTS, unknownPlaceholders } from './judge-template.js';
import type { Issue } from '../shared/errors.js';
import { escapePointerToken, isPlainObject } from '../shared/json.js';
import type { RewardBinding, RewardScope, RewardSourceDefinition, ToolPolicy } from './definition.js';
import { compileCondition, ConditionSyntaxError, type CompiledCondition } from './enabled-if.js';

const KINDS = ['tool', 'module', 'judge', 'service', 'external'] as const;
const MODULE_ONLY = ['export', 'timeout_ms', 'retry', 'concurrency', 'when', 'scope'];
/** A judge call or a reward model may take a while; a tool's 30 s default is too short for a slow judge. */
const SOURCE_TIMEOUT_MS = 60_000;

export function defaultBinding(source: Pick<RewardSourceDefinition, 'delayMs'>): RewardBinding {
  return source.delayMs === 0 ? { kind: 'tool' } : { kind: 'external' };
}

export async function bindRewardSources(
  spec: Readonly<Record<string, unknown>> | undefined,
  sources: Map<string, RewardSourceDefinition>,
  ctx: { readonly dir: string; readonly file: string; readonly issues: Issue[]; readonly signal?: AbortSignal },
): Promise<void> {
  for (const [name, raw] of Object.entries(spec ?? {})) {
    const pointer = `/reward_sources/${escapePointerToken(name)}`;
    const at = (sub: string, message: string): void => void ctx.issues.push({ file: ctx.file, pointer: pointer + sub, message });
    const source = sources.get(name);
    if (!source) {
      at('', `binds reward source '${name}', which the reward schema does not declare (declared: ${[...sources.keys()].join(', ') || 'none'})`);
      continue;
    }
    if (!isPlainObject(raw)) continue; // the meta-schema has reported it
    const kinds = KINDS.filter((k) => k in raw);
    if (kinds.length !== 1) {
      at('', kinds.length === 0 ? `needs one of ${KINDS.join(', ')}` : `has ${kinds.join(' and ')}: a source has exactly one binding`);
      continue;
    }
    const kind = kinds[0] as (typeof KINDS)[number];
    if (kind !== 'module') for (const k of MODULE_ONLY) if (k in raw) at(`/${k}`, `'${k}' goes with a module binding${kind === 'judge' || kind === 'service' ? ` (put it inside the ${kind} object)` : ''}`);
    if (kind === 'tool' && source.delayMs > 0) at('/tool', `a tool reports its rewards with its result, but '${name}' declares delay_ms ${source.delayMs}: bind it to a module, a judge or external, or set delay_ms to 0`);
    const binding = await bindingOf(kind, raw, name, ctx, at);
    if (binding) sources.set(name, { ...source, binding });
  }
}

async function bindingOf(
  kind: (typeof KINDS)[number],
  raw: Record<string, unknown>,
  name: string,
  ctx: { readonly dir: string; readonly file: string; readonly issues: Issue[]; readonly signal?: AbortSignal },
  at: (sub: string, message: string) => void,
): Promise<RewardBinding | undefined> {
  switch (kind) {
    case 'tool':
    case 'external':
      return { kind };
    case 'module': {
      const module = path.resolve(ctx.dir, raw['module'] as string);
      if (!existsSync(module)) at('/module', `module '${String(raw['module'])}' does not exist (looked at ${module})`);
      const when = conditionOf(raw['when'], '/when', at);
      return {
        kind: 'module',
        module,
        exportName: typeof raw['export'] === 'string' ? raw['export'] : name,
        scope: scopeOf(raw['scope']),
        policy: sourcePolicy(raw),
        ...(when ? { when } : {}),
      };
    }
    case 'judge': {
      const j = raw['judge'] as Record<string, unknown>;
      const when = conditionOf(j['when'], '/judge/when', at);
      const promptFile = path.resolve(ctx.dir, j['prompt'] as string);
      let template = '';
      try {
        template = await readFile(promptFile, { encoding: 'utf8', ...(ctx.signal ? { signal: ctx.signal } : {}) });
      } catch (err) {
        if (ctx.signal?.aborted) throw ctx.signal.reason;
        at('/judge/prompt', `cannot read the prompt template '${String(j['prompt'])}': ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
        return undefined;
      }
      for (const name of unknownPlaceholders(template)) at('/judge/prompt', `the prompt template uses {{${name}}}, which is not one of ${TEMPLATE_ROOTS.join(', ')}`);
      const provider = j['provider'] as JudgeConfig['provider'];
      const budget = j['budget'] as { tokens?: number; usd?: number } | undefined;
      const price = j['price'] as { input_per_mtok: number; output_per_mtok: number } | undefined;
      const judge: JudgeConfig = {
        provider,
        model: j['model'] as string,
        promptFile,
        template,
        ...(typeof j['system'] === 'string' ? { system: j['system'] } : {}),
        ...(typeof j['base_url'] === 'string' ? { baseURL: j['base_url'] } : {}),
        apiKeyEnv: typeof j['api_key_env'] === 'string' ? j['api_key_env'] : provider === 'anthropic' ? 'ANTHROPIC_API_KEY' : 'OPENAI_API_KEY',
        maxTokens: typeof j['max_tokens'] === 'number' ? j['max_tokens'] : 256,
        ...(typeof j['temperature'] === 'number' ? { temperature: j['temperature'] } : {}),
        maxRetries: typeof j['max_retries'] === 'number' ? j['max_retries'] : 3,
        outOfRange: j['out_of_range'] === 'reject' ? 'reject' : 'clamp',
        ...(budget ? { budget } : {}),
        ...(price ? { price: { inputPerMTok: price.input_per_mtok, outputPerMTok: price.output_per_mtok } } : {}),
      };
      return { kind: 'judge', judge, scope: scopeOf(j['scope']), policy: sourcePolicy(j), ...(when ? { when } : {}) };
    }
    case 'service': {
      const s = raw['service'] as Record<string, unknown>;
      const when = conditionOf(s['when'], '/service/when', at);
      return { kind: 'service', url: s['url'] as string, ...(typeof s['token_env'] === 'string' ? { tokenEnv: s['token_env'] } : {}), scope: scopeOf(s['scope']), policy: sourcePolicy(s), ...(when ? { when } : {}) };
    }
  }
}

function scopeOf(v: unknown): RewardScope {
  return v === 'episode' ? 'episode' : 'step';
}

/** Timeout, retry, circuit breaker and concurrency of a computed source; the same keys as a tool's. */
/** A computed source's policy when env.json says nothing: its timeout, 16 evaluations at once, no retry. */
export const defaultSourcePolicy = (): ToolPolicy => sourcePolicy({});

function sourcePolicy(cfg: Record<string, unknown>): ToolPolicy {
  const retry = cfg['retry'] as { max_attempts?: number; initial_delay_ms?: number; max_delay_ms?: number } | undefined;
  const breaker = cfg['circuit_breaker'] as { failures?: number; half_open_after_ms?: number } | undefined;
  return {
    timeoutMs: typeof cfg['timeout_ms'] === 'number' ? cfg['timeout_ms'] : SOURCE_TIMEOUT_MS,
    ...(retry ? { retry: { maxAttempts: retry.max_attempts ?? 3, initialDelayMs: retry.initial_delay_ms ?? 100, maxDelayMs: retry.max_delay_ms ?? 5_000 } } : {}),
    ...(breaker ? { circuitBreaker: { failures: breaker.failures ?? 5, halfOpenAfterMs: breaker.half_open_after_ms ?? 30_000 } } : {}),
    concurrency: typeof cfg['concurrency'] === 'number' ? cfg['concurrency'] : 16,
  };
}

function conditionOf(v: unknown, sub: string, at: (sub: string, message: string) => void): CompiledCondition | undefined {
  if (typeof v !== 'string') return undefined;
  try {
    return compileCondition(v);
  } catch (err) {
    if (!(err instanceof ConditionSyntaxError)) throw err;
    at(sub, `when ${JSON.stringify(v)}: ${err.message}`);
    return undefined;
  }
}

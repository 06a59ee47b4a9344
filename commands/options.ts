/** Flag parsers shared by the commands: each rejects bad input with a message commander prints (exit 2). */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { LLM_DEFAULTS, PROGRAM_DEFAULTS } from '../src/shared/defaults.js';
import type { JsonValue, LlmPolicySettings, ProgramLimits } from '../src/internal.js';

export function positiveInt(value: string): number {
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError('expected a whole number ≥ 1.');
  return Number(value);
}

/** `--threads`: a whole number ≥ 1, or `auto`. */
export function threadsOption(value: string): number | 'auto' {
  if (value === 'auto') return 'auto';
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError("expected a whole number ≥ 1, or 'auto'.");
  return Number(value);
}

export function integer(value: string): number {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError('expected an integer.');
  return Number(value);
}

export function wholeNumber(v: string): number {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError('expected a whole number.');
  return Number(v);
}

export function ratio(v: string): number {
  const n = Number(v);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError('expected a number between 0 and 1.');
  return n;
}

/** `60s`, `2m`, `500ms`, or a number of seconds. */
export function duration(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(v.trim());
  if (!m) throw new InvalidArgumentError('expected a duration such as 60s, 2m or 500ms.');
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 'm' ? n * 60_000 : n * 1000;
}

/** A duration as `duration` reads one back: whole minutes as `5m`, seconds as `30s`, else `ms`. */
export function formatDuration(ms: number): string {
  if (ms > 0 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms > 0 && ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** A duration flag whose help shows its default as the flag takes one (`30s`, not `30000`, which the flag would read as seconds). */
export function durationOption(flags: string, description: string, defaultMs: number): Option {
  return new Option(flags, description).argParser(duration).default(defaultMs, formatDuration(defaultMs));
}

/** `key=value`, repeatable; the value is read as JSON when it parses (numbers, booleans), else as a string. */
export function toolOption(value: string, previous: Record<string, JsonValue>): Record<string, JsonValue> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected key=value, e.g. latency_scale=0.1.');
  const raw = value.slice(eq + 1);
  let parsed: JsonValue;
  try {
    parsed = JSON.parse(raw) as JsonValue;
  } catch {
    parsed = raw;
  }
  return { ...previous, [value.slice(0, eq)]: parsed };
}

/** `source=<binding JSON or a JSON file>`, repeatable: replaces that reward source's binding for this run. */
export function rewardSource(value: string, previous: Record<string, JsonValue>): Record<string, JsonValue> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected source=<file.json> or source=\'{"judge": {...}}\'.');
  const raw = value.slice(eq + 1).trim();
  let text = raw;
  if (!raw.startsWith('{')) {
    try {
      text = readFileSync(raw, 'utf8');
    } catch (err) {
      throw new InvalidArgumentError(`cannot read '${raw}': ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
    }
  }
  try {
    return { ...previous, [value.slice(0, eq)]: JSON.parse(text) as JsonValue };
  } catch (err) {
    throw new InvalidArgumentError(`the binding of '${value.slice(0, eq)}' is not JSON: ${(err as Error).message}.`);
  }
}

/** `--otel <url>`: the same words on every command that can trace a run. */
export const OTEL_HELP = 'send OpenTelemetry traces (a trace per episode) over OTLP/HTTP to this receiver, e.g. http://localhost:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT / $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT when set)';

/** The flags of an `llm:<model>` policy, as `agent run` and `agent benchmark` take them. */
export interface LlmFlags {
  llmBaseUrl?: string;
  llmProvider?: 'anthropic' | 'openai';
  tokens?: boolean;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  toolParser?: string;
  maxContext?: number;
}

function nonNegative(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !(n >= 0) || !Number.isFinite(n)) throw new InvalidArgumentError('expected a number ≥ 0.');
  return n;
}

/** Adds the llm: policy's flags (where it is served, token mode, sampling) to a command. */
export function addLlmOptions(command: Command): Command {
  return command
    .option('--llm-base-url <url>', 'serve llm: models from here (an OpenAI-compatible server such as vLLM or Ollama: include /v1)')
    .option('--llm-provider <provider>', 'anthropic or openai (default: anthropic for claude-* models)', (v: string) => {
      if (v !== 'anthropic' && v !== 'openai') throw new InvalidArgumentError('expected anthropic or openai.');
      return v;
    })
    .option('--tokens', 'token-in, token-out against a vLLM-compatible --llm-base-url: every turn\'s token ids and logprobs are recorded, exactly as the server produced them (agent export --format tokens)')
    .option('--temperature <t>', `sampling temperature (default: ${LLM_DEFAULTS.temperature}, or ${LLM_DEFAULTS.tokensTemperature} with --tokens)`, nonNegative)
    .option('--top-p <p>', `nucleus sampling (default: ${LLM_DEFAULTS.topP})`, ratio)
    .option('--max-tokens <n>', `tokens per model turn at most, sent on every request (default: ${LLM_DEFAULTS.maxTokens})`, positiveInt)
    .option('--tool-parser <name>', `with --tokens: how tool calls are read from the generated text, by vLLM's parser names: hermes or llama3_json (default: ${LLM_DEFAULTS.toolParser})`)
    .option('--max-context <n>', "with --tokens: tokens per episode at most (default: the server's max_model_len); an episode that would pass it ends truncated, context_limit", positiveInt);
}

/** The llm: policy's settings from its flags (only those given). */
export function llmSettings(flags: LlmFlags): LlmPolicySettings {
  return {
    ...(flags.llmBaseUrl !== undefined ? { baseURL: flags.llmBaseUrl } : {}),
    ...(flags.llmProvider ? { provider: flags.llmProvider } : {}),
    ...(flags.tokens ? { tokens: true } : {}),
    ...(flags.temperature !== undefined ? { temperature: flags.temperature } : {}),
    ...(flags.topP !== undefined ? { topP: flags.topP } : {}),
    ...(flags.maxTokens !== undefined ? { maxTokens: flags.maxTokens } : {}),
    ...(flags.toolParser !== undefined ? { toolParser: flags.toolParser } : {}),
    ...(flags.maxContext !== undefined ? { maxContext: flags.maxContext } : {}),
  };
}

export interface ProgramFlags {
  programTimeout?: number;
  maxTurns?: number;
}

/** An agent program's limits per episode (`--policy cmd:` only): wall time and model calls. */
export function addProgramOptions(command: Command): Command {
  return command
    .option('--program-timeout <duration>', `with a cmd: policy: wall time per episode; past it the program and everything it started is killed and the episode ends time_limit (default: ${formatDuration(PROGRAM_DEFAULTS.timeoutMs)})`, duration)
    .option('--max-turns <n>', `with a cmd: policy: model calls per episode; the one past it is refused and the episode ends max_turns (default: ${PROGRAM_DEFAULTS.maxTurns})`, positiveInt);
}

/** The program limits the flags set; undefined when none. Given with a policy other than `cmd:`, the flag that does not apply (a usage error for the caller). */
export function programLimits(flags: ProgramFlags & { readonly policy: string }): { readonly limits?: ProgramLimits; readonly misplaced?: string } {
  const limits: ProgramLimits = { ...(flags.programTimeout !== undefined ? { timeoutMs: flags.programTimeout } : {}), ...(flags.maxTurns !== undefined ? { maxTurns: flags.maxTurns } : {}) };
  if (Object.keys(limits).length === 0) return {};
  if (!flags.policy.startsWith('cmd:')) return { misplaced: flags.programTimeout !== undefined ? '--program-timeout' : '--max-turns' };
  return { limits };
}

export interface SandboxFlags {
  sandbox?: 'isolated' | 'unsafe-host';
}

/** How an env's sandbox runs its commands: isolated unless `unsafe-host` is asked for by name. */
export function addSandboxOption(command: Command): Command {
  return command.addOption(
    new Option('--sandbox <mode>', "how an env's sandbox tools run commands: isolated (bubblewrap; an error where it cannot run) or unsafe-host (no isolation at all: your files, your network; only the limits hold)").choices(['isolated', 'unsafe-host']),
  );
}

/** Said on every run that asks for it, before anything runs. */
export function sandboxWarning(flags: SandboxFlags, env: { readonly name: string; readonly sandbox?: unknown }): string | undefined {
  if (flags.sandbox !== 'unsafe-host') return undefined;
  return env.sandbox
    ? `warning: --sandbox unsafe-host: ${env.name}'s sandbox tools run model-written commands with no isolation, as you, with your files and network (only the limits hold)\n`
    : `warning: --sandbox unsafe-host changes nothing: ${env.name} has no sandbox\n`;
}

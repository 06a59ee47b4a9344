/** Flag parsers shared by the commands: each rejects bad input with a message commander prints (exit 2). */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from 'commander';
import type { JsonValue } from '../src/internal.js';

export function positiveInt(value: string): number {
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError('expected a whole number ≥ 1.');
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

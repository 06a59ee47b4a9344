/**
 * The prompt templates of LLM judges: `{{state.user.name}}`-style placeholders over a fixed set of
 * roots. Checked when an env loads (an unknown root is a definition error), filled when a judge asks.
 */
import { isPlainObject, type JsonValue } from '../shared/json.js';

/** The names a template may use; `{{state.user.name}}` reads inside one. */
export const TEMPLATE_ROOTS = ['state', 'state_before', 'action', 'params', 'observation', 'step', 'episode', 'trace_id', 'trajectory', 'min', 'max', 'source'] as const;

const PLACEHOLDER = /\{\{\s*([A-Za-z_][\w]*)((?:\.[\w-]+)*)\s*\}\}/g;

/** Placeholders whose root is not one of {@link TEMPLATE_ROOTS}, for load-time checks. */
export function unknownPlaceholders(template: string): string[] {
  const roots = new Set<string>(TEMPLATE_ROOTS);
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1] as string).filter((r) => !roots.has(r));
}

export function fillTemplate(template: string, vars: Readonly<Record<string, JsonValue | undefined>>): string {
  return template.replace(PLACEHOLDER, (_all, root: string, rest: string) => {
    let v: JsonValue | undefined = vars[root];
    for (const key of rest.split('.').slice(1)) {
      v = Array.isArray(v) ? v[Number(key)] : isPlainObject(v) ? (v as Record<string, JsonValue>)[key] : undefined;
    }
    if (v === undefined) return '(none)';
    return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
  });
}


/**
 * The templates of a sandbox tool's command and stdin: `{name}` is the call's param of that name
 * (a string as it is, anything else as its JSON; an absent one as nothing), `{{` and `}}` are
 * braces. A param's value is one argument however it is spelled: the command never goes through
 * a shell, so a model's quotes and semicolons are only text.
 */
import type { JsonObject } from '../shared/json.js';

type Part = { readonly text: string } | { readonly param: string };

const cache = new Map<string, readonly Part[]>();

function parse(template: string): readonly Part[] {
  let parts = cache.get(template);
  if (parts) return parts;
  const out: Part[] = [];
  let text = '';
  for (let i = 0; i < template.length; i++) {
    const c = template[i];
    if ((c === '{' || c === '}') && template[i + 1] === c) {
      text += c;
      i++;
    } else if (c === '{') {
      const end = template.indexOf('}', i);
      const name = end < 0 ? '' : template.slice(i + 1, end);
      if (name === '' || name.includes('{')) throw new Error(`${JSON.stringify(template)}: '{' at ${i} opens no {name} (write {{ for a brace)`);
      if (text) out.push({ text });
      text = '';
      out.push({ param: name });
      i = end;
    } else if (c === '}') {
      throw new Error(`${JSON.stringify(template)}: '}' at ${i} closes nothing (write }} for a brace)`);
    } else {
      text += c;
    }
  }
  if (text) out.push({ text });
  parts = out;
  cache.set(template, parts);
  return parts;
}

/** The param names a template reads; throws on an unbalanced brace. */
export function templateNames(template: string): string[] {
  return parse(template).flatMap((p) => ('param' in p ? [p.param] : []));
}

/** The template with the params' values in place. */
export function fillTemplate(template: string, params: JsonObject): string {
  let out = '';
  for (const p of parse(template)) {
    if ('text' in p) out += p.text;
    else {
      const v = params[p.param];
      out += v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v);
    }
  }
  return out;
}

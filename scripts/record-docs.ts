/**
 * docs/reference/records.md, generated from the JSON Schemas in schemas/: one table per record the toolkit
 * writes (each field's path, type, whether it is always there, and its description), so the field
 * reference cannot drift from what the code validates. `npm run docs:records` rewrites it;
 * scripts/record-docs.test.ts fails when the committed file is not what the schemas give.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
export const RECORD_DOCS = path.join(ROOT, 'docs', 'reference', 'records.md');

/** The records, in the order a reader meets them: the run folder's files, then what commands write from them. */
const RECORDS: readonly { schema: string; where: string }[] = [
  { schema: 'run-manifest', where: '`run.json`' },
  { schema: 'run-event', where: '`events.jsonl`, one per line' },
  { schema: 'trajectory-record', where: '`trajectories.jsonl`, one per settled step' },
  { schema: 'reward-log-record', where: '`rewards.jsonl`, one per change to a delayed reward' },
  { schema: 'state-record', where: '`states.jsonl`, one per distinct initial state' },
  { schema: 'episode-record', where: '`episodes.jsonl`, one per finished episode' },
  { schema: 'run-summary', where: '`summary.json`' },
  { schema: 'curriculum', where: '`curriculum.json` (`agent serve` rollouts)' },
  { schema: 'benchmark-report', where: '`benchmark.json` (`agent benchmark`)' },
  { schema: 'conversation-record', where: '`conversations.jsonl` (`agent benchmark --policy llm:…`), one per episode' },
  { schema: 'export-record', where: '`agent export` (jsonl), one per step' },
];

interface Schema {
  readonly type?: string | readonly string[];
  readonly description?: string;
  readonly title?: string;
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean | Schema;
  readonly items?: Schema;
  readonly enum?: readonly unknown[];
  readonly const?: unknown;
  readonly $ref?: string;
  readonly $defs?: Readonly<Record<string, Schema>>;
  readonly oneOf?: readonly Schema[];
  readonly anyOf?: readonly Schema[];
  readonly allOf?: readonly { readonly if?: Schema; readonly then?: Schema }[];
}

interface Row {
  readonly path: string;
  readonly type: string;
  readonly always: boolean;
  readonly description: string;
}

function resolve(root: Schema, s: Schema): Schema {
  if (!s.$ref) return merged(root, s);
  const name = s.$ref.replace('#/$defs/', '');
  const target = root.$defs?.[name];
  if (!target) throw new Error(`unresolved $ref ${s.$ref}`);
  return { ...resolve(root, target), ...(s.description ? { description: s.description } : {}) };
}

/**
 * Alternatives that are all objects (a chat turn by role) read as one object: every variant's
 * fields, a field's types joined, and "always" only for what every variant requires.
 */
function merged(root: Schema, s: Schema): Schema {
  const variants = (s.oneOf ?? s.anyOf)?.map((v) => resolve(root, v));
  if (!variants || !variants.every((v) => v.properties)) return s;
  const properties: Record<string, Schema> = {};
  for (const v of variants) {
    for (const [name, p] of Object.entries(v.properties ?? {})) {
      const seen = properties[name];
      properties[name] = seen ? { oneOf: [...(seen.oneOf ?? [seen]), p], ...(seen.description ?? p.description ? { description: seen.description ?? p.description } : {}) } : p;
    }
  }
  const required = Object.keys(properties).filter((name) => variants.every((v) => v.required?.includes(name)));
  return { type: 'object', ...(s.description ? { description: s.description } : {}), properties, required };
}

function typeOf(root: Schema, s: Schema): string {
  const r = resolve(root, s);
  if (r.const !== undefined) return `\`${JSON.stringify(r.const)}\``;
  if (r.enum) return r.enum.map((v) => `\`${JSON.stringify(v)}\``).join(' \\| ');
  const alternatives = r.oneOf ?? r.anyOf;
  if (alternatives) return [...new Set(alternatives.map((a) => typeOf(root, a)))].join(' \\| ');
  const types = r.type === undefined ? ['any'] : typeof r.type === 'string' ? [r.type] : [...r.type];
  return types.map((t) => (t === 'array' && r.items ? `${typeOf(root, r.items).replace(/ \\\| /g, '/')}[]` : t)).join(' \\| ');
}

/** Every field, nested ones as dotted paths (`rewards.*.delay_ms`, `messages[].role`). */
function rows(root: Schema, s: Schema, prefix: string, parentAlways: boolean): Row[] {
  const out: Row[] = [];
  const r = resolve(root, s);
  for (const [name, child] of Object.entries(r.properties ?? {})) {
    const p = `${prefix}${name}`;
    const c = resolve(root, child);
    const always = parentAlways && (r.required ?? []).includes(name);
    out.push({ path: p, type: typeOf(root, c), always, description: c.description ?? '' });
    out.push(...nested(root, c, p, always));
  }
  return out;
}

function nested(root: Schema, c: Schema, p: string, always: boolean): Row[] {
  if (c.properties) return rows(root, c, `${p}.`, always);
  if (typeof c.additionalProperties === 'object') {
    const value = resolve(root, c.additionalProperties);
    return value.properties ? rows(root, value, `${p}.*.`, always) : [];
  }
  if (c.items) {
    const item = resolve(root, c.items);
    return item.properties ? rows(root, item, `${p}[].`, always) : [];
  }
  return [];
}

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

/** "required when": the schema's `if type is … then required …` rules, as sentences. */
function conditions(root: Schema): string[] {
  return (root.allOf ?? []).flatMap((rule) => {
    const when = rule.if?.properties?.['type'];
    const required = rule.then?.required;
    if (!when || !required) return [];
    const types = when.const !== undefined ? [when.const] : (when.enum ?? []);
    return [`- ${types.map((t) => `\`${String(t)}\``).join(', ')}: ${required.map((f) => `\`${f}\``).join(', ')}`];
  });
}

export function renderRecordDocs(): string {
  const parts = [
    '# Records',
    '',
    '<!-- Generated from schemas/ by `npm run docs:records`; edit the schemas, not this file. -->',
    '',
    'Every record the toolkit writes, field by field, from the JSON Schemas in `schemas/`',
    '(which also ship with the package). A nested field is written as a path: `a.b` a field of an',
    'object, `a.*.b` a field of each value of a map, `a[].b` a field of each item of a list. "always"',
    'means the field is in every record; the others appear when they apply.',
  ];
  for (const { schema, where } of RECORDS) {
    const file = `${schema}.schema.json`;
    const root = JSON.parse(readFileSync(path.join(ROOT, 'schemas', file), 'utf8')) as Schema;
    parts.push('', `## ${root.title ?? schema}`, '', `${where}: [\`schemas/${file}\`](/schemas/${file}).${root.description ? ` ${cell(root.description)}` : ''}`, '');
    parts.push('| field | type | always | description |', '|---|---|---|---|');
    for (const row of rows(root, root, '', true)) parts.push(`| \`${row.path}\` | ${row.type} | ${row.always ? 'yes' : ''} | ${cell(row.description)} |`);
    const when = conditions(root);
    if (when.length > 0) parts.push('', 'Also always there, by `type`:', '', ...when);
  }
  return `${parts.join('\n')}\n`;
}

if (process.argv[1] === import.meta.filename) {
  writeFileSync(RECORD_DOCS, renderRecordDocs());
  process.stdout.write(`wrote ${path.relative(ROOT, RECORD_DOCS)}\n`);
}

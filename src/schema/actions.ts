/**
 * Reads an action document in any of the accepted forms into a list of actions:
 * - the article's dialect: `{type: "object", properties: {get_weather: {params: {...}, enabled_if: "..."}}}`;
 * - a list of OpenAI function tools `{type: "function", function: {name, description, parameters}}`;
 * - a list of MCP tools `{name, description, inputSchema}` (or an MCP `tools/list` result `{tools: [...]}`);
 * - a list of plain `{name, description, parameters}` tools (tau-bench, BFCL normalized).
 * Every parameter schema is checked against its meta-schema; problems come back as issues with
 * the file and JSON pointer, never as exceptions.
 */
import { checkSchema, validate, type JsonSchema } from './ajv.js';
import { convertBfclSchema, findForeignTypes, foreignTypeMessage, type SchemaDialect } from './dialects.js';
import { metaSchema } from './meta-schemas.js';
import { findUnsatisfiable, type Unsatisfiable } from './satisfiable.js';
import type { Issue } from '../shared/errors.js';
import { escapePointerToken, isPlainObject } from '../shared/json.js';

/** An action read from an action document: name, description, parameter schema, its `enabled_if` source, and where it was declared. */
export interface ParsedAction {
  readonly name: string;
  readonly description?: string;
  readonly parameters: JsonSchema;
  readonly enabledIf?: string;
  /** `user` for an action of the episode's other side (τ²-bench's phone): the agent's surfaces never offer it. */
  readonly actor?: 'user';
  readonly source: { readonly file: string; readonly pointer: string };
  readonly unsatisfiable?: Unsatisfiable;
}

/** The actions of an action document, and the problems found in it (each naming its JSON pointer). */
export interface ParseResult {
  readonly actions: ParsedAction[];
  readonly issues: Issue[];
  readonly warnings: Issue[];
}

export interface ParseActionsOptions {
  /** Shown in issues. */
  readonly file: string;
  readonly dialect?: SchemaDialect;
  /** Pointer of `doc` inside its file, when the document is embedded (an inline manifest field). */
  readonly pointer?: string;
}

const OPENAI_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const EMPTY_PARAMS: JsonSchema = Object.freeze({ type: 'object', properties: {} });

/** Reads an action document (ours, OpenAI tools, MCP tools or BFCL), checking each action. */
export function parseActionDocument(doc: unknown, options: ParseActionsOptions): ParseResult {
  const { file } = options;
  const base = options.pointer ?? '';
  const issues: Issue[] = [];
  const warnings: Issue[] = [];
  const raw: { name: string; description?: string; parameters: unknown; enabledIf?: unknown; actor?: unknown; pointer: string; paramsPointer: string }[] = [];

  if (Array.isArray(doc) || (isPlainObject(doc) && Array.isArray(doc['tools']) && !isPlainObject(doc['properties']))) {
    const list = Array.isArray(doc) ? doc : (doc['tools'] as unknown[]);
    const listPointer = Array.isArray(doc) ? base : `${base}/tools`;
    const shapeIssues = validate(metaSchema('tool-list'), list, file).map((i) => ({ ...i, pointer: listPointer + i.pointer }));
    if (shapeIssues.length > 0) {
      issues.push(...explainToolShape(list, listPointer, file));
      return { actions: [], issues, warnings };
    }
    list.forEach((entry, i) => {
      const t = entry as Record<string, unknown>;
      const pointer = `${listPointer}/${i}`;
      if (t['type'] === 'function' && isPlainObject(t['function'])) {
        const f = t['function'];
        raw.push({ name: f['name'] as string, description: f['description'] as string | undefined, parameters: f['parameters'] ?? EMPTY_PARAMS, enabledIf: t['enabled_if'], actor: t['actor'], pointer, paramsPointer: `${pointer}/function/parameters` });
      } else if ('inputSchema' in t) {
        raw.push({ name: t['name'] as string, description: (t['description'] as string | null) ?? undefined, parameters: t['inputSchema'], enabledIf: t['enabled_if'], actor: t['actor'], pointer, paramsPointer: `${pointer}/inputSchema` });
      } else {
        raw.push({ name: t['name'] as string, description: (t['description'] as string | null) ?? undefined, parameters: t['parameters'] ?? EMPTY_PARAMS, enabledIf: t['enabled_if'], actor: t['actor'], pointer, paramsPointer: `${pointer}/parameters` });
      }
    });
  } else if (isPlainObject(doc) && isPlainObject(doc['properties'])) {
    const shapeIssues = validate(metaSchema('action-schema'), doc, file).map((i) => ({ ...i, pointer: base + i.pointer }));
    if (shapeIssues.length > 0) {
      issues.push(
        ...shapeIssues.map((i) =>
          i.message.includes('must NOT be valid') ? { ...i, message: "give either 'params' (a map of parameter schemas) or 'parameters' (one JSON Schema), not both" } : i,
        ),
      );
      return { actions: [], issues, warnings };
    }
    for (const [name, value] of Object.entries(doc['properties'] as Record<string, Record<string, unknown>>)) {
      const pointer = `${base}/properties/${escapePointerToken(name)}`;
      let parameters: unknown;
      let paramsPointer: string;
      if (value['parameters'] !== undefined) {
        parameters = value['parameters'];
        paramsPointer = `${pointer}/parameters`;
      } else {
        // The article's `params` shorthand reads like a signature: every listed param is required
        // unless the action says otherwise with its own `required` list.
        const params = (value['params'] as Record<string, unknown> | undefined) ?? {};
        parameters = { type: 'object', properties: params, required: (value['required'] as string[] | undefined) ?? Object.keys(params) };
        paramsPointer = `${pointer}/params`;
      }
      raw.push({ name, description: value['description'] as string | undefined, parameters, enabledIf: value['enabled_if'], pointer, paramsPointer });
    }
  } else {
    issues.push({
      file,
      pointer: base,
      message:
        'not an action document: expected the article form {"properties": {"<action>": {"params": {...}, "enabled_if": "..."}}}, or a list of OpenAI function tools, MCP tools or {name, parameters} tools',
    });
    return { actions: [], issues, warnings };
  }

  const seen = new Map<string, string>();
  const actions: ParsedAction[] = [];
  for (const r of raw) {
    const before = seen.get(r.name);
    if (before !== undefined) {
      issues.push({ file, pointer: r.pointer, message: `action '${r.name}' is declared twice (first at ${before || '(root)'}): rename one` });
      continue;
    }
    seen.set(r.name, r.pointer);
    const parameters = (options.dialect === 'bfcl' ? convertBfclSchema(r.parameters) : r.parameters) as JsonSchema;
    const foreign = findForeignTypes(parameters);
    if (foreign.length > 0) {
      for (const f of foreign.slice(0, 5)) {
        issues.push({
          file,
          pointer: r.paramsPointer + f.pointer,
          message: foreignTypeMessage(f.type, options.dialect ?? 'json-schema'),
        });
      }
      continue;
    }
    const schemaIssues = checkSchema(parameters, file, r.paramsPointer);
    if (schemaIssues.length > 0) {
      issues.push(...schemaIssues);
      continue;
    }
    if (isPlainObject(parameters) && parameters['type'] !== undefined) {
      const types = Array.isArray(parameters['type']) ? parameters['type'] : [parameters['type']];
      if (!types.includes('object')) {
        issues.push({ file, pointer: `${r.paramsPointer}/type`, message: `an action's parameters must be an object schema, not ${JSON.stringify(parameters['type'])}` });
        continue;
      }
    }
    if (!OPENAI_NAME.test(r.name)) {
      warnings.push({ file, pointer: r.pointer, message: `action name '${r.name}' does not match OpenAI's function-name rule ^[a-zA-Z0-9_-]{1,64}$: OpenAI-compatible policies cannot call it by that name` });
    }
    const unsatisfiable = findUnsatisfiable(parameters);
    if (unsatisfiable) {
      warnings.push({ file, pointer: r.paramsPointer + unsatisfiable.pointer, message: `action '${r.name}' can never be called: its parameters admit no value (${unsatisfiable.reason})` });
    }
    actions.push({
      name: r.name,
      ...(r.description !== undefined ? { description: r.description } : {}),
      parameters,
      ...(typeof r.enabledIf === 'string' ? { enabledIf: r.enabledIf } : {}),
      ...(r.actor === 'user' ? { actor: 'user' as const } : {}),
      source: { file, pointer: r.pointer },
      ...(unsatisfiable ? { unsatisfiable: { pointer: r.paramsPointer + unsatisfiable.pointer, reason: unsatisfiable.reason } } : {}),
    });
  }
  return { actions, issues, warnings };
}

/** ajv's anyOf errors for a tool list are noise; say per entry which known shape it misses. */
function explainToolShape(list: unknown[], listPointer: string, file: string): Issue[] {
  const issues: Issue[] = [];
  list.forEach((entry, i) => {
    const pointer = `${listPointer}/${i}`;
    if (!isPlainObject(entry)) {
      issues.push({ file, pointer, message: 'a tool must be an object' });
      return;
    }
    if (entry['actor'] !== undefined && entry['actor'] !== 'agent' && entry['actor'] !== 'user') {
      issues.push({ file, pointer: `${pointer}/actor`, message: `must be "agent" (the default) or "user" (an action of the episode's other side), not ${JSON.stringify(entry['actor'])}` });
    }
    if (entry['type'] === 'function') {
      const f = entry['function'];
      if (!isPlainObject(f)) issues.push({ file, pointer: `${pointer}/function`, message: "an OpenAI function tool needs a 'function' object" });
      else if (typeof f['name'] !== 'string' || f['name'] === '') issues.push({ file, pointer: `${pointer}/function/name`, message: 'is required and must be a non-empty string' });
      else if (f['parameters'] !== undefined && typeof f['parameters'] !== 'object') issues.push({ file, pointer: `${pointer}/function/parameters`, message: 'must be a JSON Schema object' });
      return;
    }
    if (typeof entry['name'] !== 'string' || entry['name'] === '') {
      issues.push({ file, pointer: `${pointer}/name`, message: 'is required and must be a non-empty string (a tool is {name, parameters}, {name, inputSchema} or {type: "function", function: {...}})' });
      return;
    }
    for (const key of ['parameters', 'inputSchema']) {
      if (entry[key] !== undefined && (typeof entry[key] !== 'object' || Array.isArray(entry[key]) || entry[key] === null) && typeof entry[key] !== 'boolean') {
        issues.push({ file, pointer: `${pointer}/${key}`, message: 'must be a JSON Schema object' });
      }
    }
    if (entry['enabled_if'] !== undefined && typeof entry['enabled_if'] !== 'string') issues.push({ file, pointer: `${pointer}/enabled_if`, message: 'must be a string expression' });
  });
  if (issues.length === 0) issues.push({ file, pointer: listPointer, message: 'not a valid tool list' });
  return issues;
}

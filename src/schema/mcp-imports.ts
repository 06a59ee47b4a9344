/**
 * The MCP part of env.json: `mcp_servers` (how to reach each server) and `actions_from` (import
 * the tools a server lists as actions). Importing asks the server for its tools/list at load time,
 * through a connection that is closed again: the env starts its own when it first calls one.
 */
import path from 'node:path';
import { describeError, type Issue } from '../shared/errors.js';
import { escapePointerToken, isPlainObject } from '../shared/json.js';
import { deepEqual } from '../state/patch.js';
import { parseActionDocument } from './actions.js';
import type { ActionDefinition, EnvDefinition, McpImportSpec, McpServerSpec, McpToolInfo } from './definition.js';

/**
 * Lists an MCP server's tools (a connection opened and closed again). Owned here, given by the
 * rooms above that have an MCP client (the env, schema-diff): loading stays free of transports.
 */
export type McpToolLister = (spec: McpServerSpec, signal?: AbortSignal) => Promise<readonly McpToolInfo[]>;

const DEFAULT_STARTUP_TIMEOUT_MS = 10_000;

export type McpImport = McpImportSpec;

/** `mcp_servers` as specs (the manifest's shape is checked by its schema already). */
export function mcpServerSpecs(raw: Readonly<Record<string, unknown>> | undefined, dir: string): Map<string, McpServerSpec> {
  const specs = new Map<string, McpServerSpec>();
  for (const [name, cfg] of Object.entries(raw ?? {})) {
    if (!isPlainObject(cfg)) continue;
    const common = { name, perInstance: cfg['per_instance'] === true, startupTimeoutMs: typeof cfg['startup_timeout_ms'] === 'number' ? cfg['startup_timeout_ms'] : DEFAULT_STARTUP_TIMEOUT_MS };
    if (Array.isArray(cfg['command'])) {
      specs.set(name, { ...common, transport: 'stdio', command: cfg['command'] as string[], cwd: path.resolve(dir, typeof cfg['cwd'] === 'string' ? cfg['cwd'] : '.'), ...(isPlainObject(cfg['env']) ? { env: cfg['env'] as Record<string, string> } : {}) });
    } else if (typeof cfg['url'] === 'string') {
      specs.set(name, { ...common, transport: 'http', url: cfg['url'], ...(isPlainObject(cfg['headers']) ? { headers: cfg['headers'] as Record<string, string> } : {}) });
    }
  }
  return specs;
}

/** The action name an import gives a server's tool, or undefined when the import leaves it out. */
export function importedName(imp: McpImport, tool: string): string | undefined {
  if (imp.include && !imp.include.includes(tool)) return undefined;
  if (imp.exclude?.includes(tool)) return undefined;
  return `${imp.prefix ?? ''}${imp.rename?.[tool] ?? tool}`;
}

/** `actions_from` as a list of imports. */
export function mcpImportsOf(raw: unknown): McpImport[] {
  return (raw === undefined ? [] : Array.isArray(raw) ? raw : [raw]).map((entry) => (typeof entry === 'string' ? { server: entry } : (entry as McpImport)));
}

export interface ImportedTools {
  /** MCP tool objects ({name, description, inputSchema}) under their action names, for the action parser. */
  readonly tools: { readonly name: string; readonly description?: string; readonly inputSchema: unknown }[];
  /** action name → where it comes from. */
  readonly origins: Map<string, { readonly server: string; readonly tool: string; readonly pointer: string }>;
}

/** Lists each `actions_from` server's tools and maps them to actions (filtered, renamed, prefixed). */
export async function importMcpActions(raw: unknown, specs: ReadonlyMap<string, McpServerSpec>, file: string, issues: Issue[], list: McpToolLister | undefined, signal?: AbortSignal): Promise<ImportedTools> {
  const imports = mcpImportsOf(raw);
  const out: ImportedTools = { tools: [], origins: new Map() };
  for (const [i, imp] of imports.entries()) {
    const pointer = Array.isArray(raw) ? `/actions_from/${i}` : '/actions_from';
    const spec = specs.get(imp.server);
    if (!spec) {
      issues.push({ file, pointer: typeof raw === 'string' || typeof (raw as unknown[])[i] === 'string' ? pointer : `${pointer}/server`, message: `no MCP server '${imp.server}' in mcp_servers (declared: ${[...specs.keys()].join(', ') || 'none'})` });
      continue;
    }
    if (!list) {
      issues.push({ file, pointer, message: `this loader cannot list the tools of MCP server '${imp.server}' (it was given no MCP client)` });
      continue;
    }
    let listed: readonly McpToolInfo[];
    try {
      listed = await list(spec, signal);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      issues.push({ file, pointer: `/mcp_servers/${escapePointerToken(imp.server)}`, message: `cannot list the tools of MCP server '${imp.server}': ${describeError(err)}` });
      continue;
    }
    const names = new Set(listed.map((t) => t.name));
    for (const [key, list] of [['include', imp.include], ['exclude', imp.exclude]] as const) {
      for (const [j, n] of (list ?? []).entries()) if (!names.has(n)) issues.push({ file, pointer: `${pointer}/${key}/${j}`, message: `MCP server '${imp.server}' has no tool '${n}' (it lists ${[...names].join(', ')})` });
    }
    for (const n of Object.keys(imp.rename ?? {})) if (!names.has(n)) issues.push({ file, pointer: `${pointer}/rename/${escapePointerToken(n)}`, message: `MCP server '${imp.server}' has no tool '${n}' to rename` });
    for (const t of listed) {
      const name = importedName(imp, t.name);
      if (name === undefined) continue;
      if (out.origins.has(name)) {
        issues.push({ file, pointer, message: `action '${name}' is imported twice (from '${out.origins.get(name)?.server}' and '${imp.server}'): rename or prefix one` });
        continue;
      }
      out.origins.set(name, { server: imp.server, tool: t.name, pointer });
      out.tools.push({ name, ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: t.inputSchema });
    }
  }
  return out;
}

export interface ImportRefresh {
  readonly added: readonly ActionDefinition[];
  readonly removed: readonly string[];
  /** The actions whose parameters changed, with their new parameters. */
  readonly changed: readonly ActionDefinition[];
}

/**
 * What a server's new tool list does to the actions imported from it: tools it added become
 * actions (with `tool_defaults`' policy), tools it dropped are dropped, and a changed inputSchema
 * replaces the action's parameters. Actions declared by hand are never touched.
 */
export function refreshImported(def: EnvDefinition, server: string, tools: readonly McpToolInfo[]): ImportRefresh {
  const next = new Map<string, McpToolInfo>();
  for (const imp of def.mcpImports?.imports ?? []) {
    if (imp.server !== server) continue;
    for (const t of tools) {
      const name = importedName(imp, t.name);
      if (name !== undefined) next.set(name, t);
    }
  }
  const ours = (a: ActionDefinition | undefined): boolean => a?.binding?.kind === 'mcp' && a.binding.imported === true && a.binding.server === server;
  const removed = [...def.actions.values()].filter((a) => ours(a) && !next.has(a.name)).map((a) => a.name);
  const added: ActionDefinition[] = [];
  const changed: ActionDefinition[] = [];
  for (const [name, tool] of next) {
    const known = def.actions.get(name);
    if (known && !ours(known)) continue;
    if (known && deepEqual(known.parameters, tool.inputSchema)) continue;
    const parsed = parseActionDocument([{ name, ...(tool.description !== undefined ? { description: tool.description } : {}), inputSchema: tool.inputSchema }], { file: `mcp:${server}`, pointer: '' });
    const fresh = parsed.actions[0];
    if (!fresh || parsed.issues.length > 0) continue;
    const { enabledIf: _condition, ...action } = fresh;
    if (known) {
      const { unsatisfiable: _was, ...rest } = known;
      changed.push({ ...rest, parameters: action.parameters, ...(action.unsatisfiable ? { unsatisfiable: action.unsatisfiable } : {}) });
    } else {
      added.push({ ...action, policy: def.mcpImports?.policy ?? {}, binding: { kind: 'mcp', server, tool: tool.name, imported: true } });
    }
  }
  return { added, removed, changed };
}

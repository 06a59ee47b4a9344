/**
 * The MCP part of env.json: `mcp_servers` (how to reach each server) and `actions_from` (import
 * the tools a server lists as actions). Importing asks the server for its tools/list at load time,
 * through a connection that is closed again: the env starts its own when it first calls one.
 */
import path from 'node:path';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describeError, type Issue } from '../shared/errors.js';
import { escapePointerToken, isPlainObject } from '../shared/json.js';
import type { McpServerSpec } from './definition.js';

const DEFAULT_STARTUP_TIMEOUT_MS = 10_000;

export interface McpImport {
  readonly server: string;
  readonly include?: readonly string[];
  readonly exclude?: readonly string[];
  readonly rename?: Readonly<Record<string, string>>;
  readonly prefix?: string;
}

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

export interface ImportedTools {
  /** MCP tool objects ({name, description, inputSchema}) under their action names, for the action parser. */
  readonly tools: { readonly name: string; readonly description?: string; readonly inputSchema: unknown }[];
  /** action name → where it comes from. */
  readonly origins: Map<string, { readonly server: string; readonly tool: string; readonly pointer: string }>;
}

/** Lists each `actions_from` server's tools and maps them to actions (filtered, renamed, prefixed). */
export async function importMcpActions(raw: unknown, specs: ReadonlyMap<string, McpServerSpec>, file: string, issues: Issue[], signal?: AbortSignal): Promise<ImportedTools> {
  const imports: McpImport[] = (raw === undefined ? [] : Array.isArray(raw) ? raw : [raw]).map((entry) => (typeof entry === 'string' ? { server: entry } : (entry as McpImport)));
  const out: ImportedTools = { tools: [], origins: new Map() };
  for (const [i, imp] of imports.entries()) {
    const pointer = Array.isArray(raw) ? `/actions_from/${i}` : '/actions_from';
    const spec = specs.get(imp.server);
    if (!spec) {
      issues.push({ file, pointer: typeof raw === 'string' || typeof (raw as unknown[])[i] === 'string' ? pointer : `${pointer}/server`, message: `no MCP server '${imp.server}' in mcp_servers (declared: ${[...specs.keys()].join(', ') || 'none'})` });
      continue;
    }
    let listed: readonly Tool[];
    // The MCP SDK is loaded only by envs that import from a server.
    const { McpConnection } = await import('../tools/mcp/mcp-connection.js');
    const connection = new McpConnection(spec);
    try {
      listed = await connection.tools(signal);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      issues.push({ file, pointer: `/mcp_servers/${escapePointerToken(imp.server)}`, message: `cannot list the tools of MCP server '${imp.server}': ${describeError(err)}` });
      continue;
    } finally {
      await connection[Symbol.asyncDispose]();
    }
    const names = new Set(listed.map((t) => t.name));
    for (const [key, list] of [['include', imp.include], ['exclude', imp.exclude]] as const) {
      for (const [j, n] of (list ?? []).entries()) if (!names.has(n)) issues.push({ file, pointer: `${pointer}/${key}/${j}`, message: `MCP server '${imp.server}' has no tool '${n}' (it lists ${[...names].join(', ')})` });
    }
    for (const n of Object.keys(imp.rename ?? {})) if (!names.has(n)) issues.push({ file, pointer: `${pointer}/rename/${escapePointerToken(n)}`, message: `MCP server '${imp.server}' has no tool '${n}' to rename` });
    for (const t of listed) {
      if (imp.include && !imp.include.includes(t.name)) continue;
      if (imp.exclude?.includes(t.name)) continue;
      const name = `${imp.prefix ?? ''}${imp.rename?.[t.name] ?? t.name}`;
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

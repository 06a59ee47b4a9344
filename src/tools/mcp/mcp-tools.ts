/**
 * MCP tools as the router's executors: which server answers a call (the env's one, or the
 * instance's own with `per_instance`), and how a `tools/call` result becomes a tool result. The
 * observation is the `structuredContent` (checked against the tool's `outputSchema` when it has
 * one), else the text of the `content` blocks (the blocks themselves when not all are text);
 * `isError: true` is a TOOL_FAILED with the tool's text; `result_to` writes the observation into
 * the state, so tools that know nothing of the env's state still produce its deltas.
 */
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { validate, type JsonSchema } from '../../schema/ajv.js';
import type { McpServerSpec, ToolBinding } from '../../schema/definition.js';
import { formatIssues, ToolError } from '../../shared/errors.js';
import type { JsonValue } from '../../shared/json.js';
import type { Executor } from '../executors.js';
import { DEFAULT_MAX_OUTPUT_BYTES } from '../subprocess.js';
import type { ToolResult } from '../types.js';
import { McpConnection } from './mcp-connection.js';

type McpBinding = Extract<ToolBinding, { kind: 'mcp' }>;

export interface McpServersOptions {
  readonly onToolsChanged?: (server: string, before: readonly Tool[], after: readonly Tool[]) => void;
}

/** The env's MCP servers: one connection each, or one per instance for `per_instance` servers. */
export class McpServers implements AsyncDisposable {
  readonly #specs: ReadonlyMap<string, McpServerSpec>;
  readonly #options: McpServersOptions;
  readonly #shared = new Map<string, McpConnection>();
  /** instance id → its own connections. */
  readonly #perInstance = new Map<string, Map<string, McpConnection>>();

  constructor(specs: ReadonlyMap<string, McpServerSpec>, options: McpServersOptions = {}) {
    this.#specs = specs;
    this.#options = options;
  }

  connection(server: string, instanceId: string): McpConnection {
    const spec = this.#specs.get(server);
    if (!spec) throw new ToolError('TOOL_NOT_FOUND', server, `no MCP server '${server}' in mcp_servers`);
    let pool = this.#shared;
    if (spec.perInstance) {
      pool = this.#perInstance.get(instanceId) ?? new Map();
      this.#perInstance.set(instanceId, pool);
    }
    let conn = pool.get(server);
    if (!conn) {
      const onToolsChanged = this.#options.onToolsChanged;
      conn = new McpConnection(spec, onToolsChanged ? { onToolsChanged: (before, after) => onToolsChanged(server, before, after) } : {});
      pool.set(server, conn);
    }
    return conn;
  }

  /** Closes the servers an instance started for itself (its session ends with it). */
  async releaseInstance(instanceId: string): Promise<void> {
    const pool = this.#perInstance.get(instanceId);
    if (!pool) return;
    this.#perInstance.delete(instanceId);
    await Promise.all([...pool.values()].map((c) => c[Symbol.asyncDispose]()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    const all = [...this.#shared.values(), ...[...this.#perInstance.values()].flatMap((p) => [...p.values()])];
    this.#shared.clear();
    this.#perInstance.clear();
    await Promise.all(all.map((c) => c[Symbol.asyncDispose]()));
  }
}

export function mcpExecutor(action: string, binding: McpBinding, servers: McpServers): Executor {
  const max = binding.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  return async (params, ctx) => {
    const conn = servers.connection(binding.server, ctx.instanceId);
    const result = await conn.call(binding.tool, params, ctx.signal, ctx.traceparent);
    // The SDK has read the reply already; the cap keeps a flood out of the state, the logs and the policy's context.
    const size = Buffer.byteLength(JSON.stringify(result));
    if (size > max) throw new ToolError('TOOL_OUTPUT_TOO_LARGE', action, `MCP server '${binding.server}' answered ${size} bytes, more than ${max}`, { hint: 'Ask for less (a range, a page), or raise max_output_bytes for this tool.' });
    const tool = (await conn.tools(ctx.signal)).find((t) => t.name === binding.tool);
    return toToolResult(action, result, tool?.outputSchema as JsonSchema | undefined, binding.resultTo);
  };
}

export function toToolResult(action: string, result: CallToolResult, outputSchema: JsonSchema | undefined, resultTo: string | undefined): ToolResult {
  const texts = result.content.flatMap((c) => (c.type === 'text' ? [c.text] : []));
  if (result.isError) throw new ToolError('TOOL_FAILED', action, texts.join('\n') || 'the MCP tool reported an error (isError) without text');
  const structured = result.structuredContent as JsonValue | undefined;
  if (outputSchema) {
    if (structured === undefined) throw new ToolError('TOOL_CONTRACT', action, 'declares an outputSchema but returned no structuredContent', { hint: 'An MCP tool with an outputSchema must return structuredContent that matches it.' });
    const issues = validate(outputSchema, structured);
    if (issues.length > 0) throw new ToolError('TOOL_CONTRACT', action, `structuredContent does not match the tool's outputSchema:\n${formatIssues(issues)}`, { issues, hint: 'The server broke its own outputSchema: report it to its authors.' });
  }
  const observation: JsonValue = structured ?? (texts.length === result.content.length ? texts.join('\n') : (result.content as unknown as JsonValue));
  return { observation, ...(resultTo !== undefined ? { patch: [{ op: 'add', path: resultTo, value: observation }] } : {}) };
}

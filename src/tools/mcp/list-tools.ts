/** An MCP server's tools/list over a connection of its own, closed again: what `actions_from` imports at load time. */
import type { McpServerSpec, McpToolInfo } from '../../schema/definition.js';

export async function listMcpTools(spec: McpServerSpec, signal?: AbortSignal): Promise<readonly McpToolInfo[]> {
  // The MCP SDK is loaded only by envs that import from a server.
  const { McpConnection } = await import('./mcp-connection.js');
  const connection = new McpConnection(spec);
  try {
    return (await connection.tools(signal)).map((t) => ({ name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: t.inputSchema, ...(t.outputSchema !== undefined ? { outputSchema: t.outputSchema } : {}) }));
  } finally {
    await connection[Symbol.asyncDispose]();
  }
}

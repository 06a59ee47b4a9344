/**
 * An episode's tools over MCP's streamable HTTP transport (`AGENT_MCP_URL`): `tools/list` shows the
 * actions enabled in the episode's state at that moment, and each `tools/call` is a step of the
 * episode, answered once it has settled (its observation, or its error with `isError`). Stateless:
 * each HTTP request gets a server of its own over the same episode, so a client may reconnect, or
 * call from several connections, without a session to lose.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { JsonObject, JsonValue } from '../shared/json.js';

/** What the MCP endpoint acts on: the tools enabled now, and a call that runs as the episode's next step. */
export interface EpisodeTools {
  readonly name: string;
  list(): Tool[];
  call(name: string, args: JsonObject, signal: AbortSignal): Promise<CallToolResult>;
}

/** The text of a tool result: a string as it is, anything else as JSON. */
export function textContent(value: JsonValue | undefined): CallToolResult['content'] {
  return [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value ?? null) }];
}

/** Answers one MCP request (`body` already parsed) for the episode's tools. */
export async function serveMcp(tools: EpisodeTools, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const [{ Server }, { StreamableHTTPServerTransport }, { CallToolRequestSchema, ListToolsRequestSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  const server = new Server({ name: tools.name, version: '0.1.0' }, { capabilities: { tools: {} }, instructions: "This episode's environment: each tool call is a step, recorded and rewarded." });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools.list() }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => tools.call(request.params.name, (request.params.arguments ?? {}) as JsonObject, extra.signal));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.once('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

/**
 * One MCP server, through the official SDK client: started on first use (stdio: a child process;
 * Streamable HTTP: a session), restarted after a crash with backoff, closed with its owner. The
 * last few KB of a stdio server's stderr are kept, so that "the server died" comes with why.
 * Failures are ToolErrors: a crash or a lost connection is retryable (the next attempt restarts
 * the server), a server that never initializes is not.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ErrorCode, ListToolsResultSchema, McpError, ToolListChangedNotificationSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpServerSpec } from '../../schema/definition.js';
import { sleep } from '../../shared/abort.js';
import { describeError, ToolError } from '../../shared/errors.js';
import type { JsonObject } from '../../shared/json.js';

/** How much of a server's stderr is kept for error messages. */
const STDERR_TAIL = 4 * 1024;
/** Restart backoff: 250 ms doubling up to 10 s; a call that succeeds resets it. */
const BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 10_000;
/** The SDK's own request timeout is 60 s; ours is the tool policy's, so the SDK's is out of the way. */
const NO_SDK_TIMEOUT = 2_147_483_647;

export const CLIENT_INFO = { name: 'agentic-rl-toolkit', version: '0.1.0' } as const;

export interface McpConnectionOptions {
  /** The server's tools/list changed (a `list_changed` notification): the old list and the new. */
  readonly onToolsChanged?: (before: readonly Tool[], after: readonly Tool[]) => void;
}

export class McpConnection implements AsyncDisposable {
  readonly spec: McpServerSpec;
  readonly #options: McpConnectionOptions;
  #ready: Promise<Client> | undefined;
  #tools: Tool[] = [];
  #stderr = '';
  /** Crashes since the last successful call: the restart backoff's exponent. */
  #crashes = 0;
  #closed = false;
  /** Clients opened and not yet closed: closing the connection closes them all. */
  readonly #open = new Set<Client>();

  constructor(spec: McpServerSpec, options: McpConnectionOptions = {}) {
    this.spec = spec;
    this.#options = options;
  }

  /** What the server wrote to stderr lately (stdio servers). */
  stderrTail(): string {
    return this.#stderr;
  }

  /** The tools the server listed when it (re)started, or after its last list_changed. */
  async tools(signal?: AbortSignal): Promise<readonly Tool[]> {
    await this.#client(signal);
    return this.#tools;
  }

  /** One `tools/call`. An aborted signal sends the server MCP's cancellation notification. */
  async call(tool: string, args: JsonObject, signal: AbortSignal, traceparent?: string): Promise<CallToolResult> {
    const client = await this.#client(signal);
    try {
      // The trace context rides in `_meta`, where MCP's tracing proposal (and OpenTelemetry's MCP conventions) put it.
      const params = { name: tool, arguments: args, ...(traceparent !== undefined ? { _meta: { traceparent } } : {}) };
      const result = await client.request({ method: 'tools/call', params }, CallToolResultSchema, { signal, timeout: NO_SDK_TIMEOUT });
      this.#crashes = 0;
      return result;
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      throw this.#callError(tool, err);
    }
  }

  #callError(tool: string, err: unknown): ToolError {
    if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
      return new ToolError('TOOL_CRASHED', tool, `MCP server '${this.spec.name}' went away during the call${this.#tail()}`, { cause: err, retryable: true, hint: 'The next attempt restarts the server: set a retry policy on this tool to make that automatic.' });
    }
    if (err instanceof McpError) return new ToolError('TOOL_FAILED', tool, `MCP server '${this.spec.name}' refused the call: ${err.message}`, { cause: err });
    return new ToolError('TOOL_CRASHED', tool, `MCP server '${this.spec.name}': ${describeError(err)}${this.#tail()}`, { cause: err, retryable: true });
  }

  #tail(): string {
    const tail = this.#stderr.trim();
    return tail ? `; its stderr ends with:\n${tail.split('\n').slice(-10).join('\n')}` : '';
  }

  /** The live client, starting (or restarting, after a backoff) the server when there is none. */
  #client(signal?: AbortSignal): Promise<Client> {
    if (this.#closed) return Promise.reject(new ToolError('TOOL_CANCELLED', this.spec.name, `MCP server '${this.spec.name}' was closed with its env`));
    this.#ready ??= this.#start(signal).catch((err: unknown) => {
      this.#ready = undefined;
      throw err;
    });
    return this.#ready;
  }

  async #start(signal?: AbortSignal): Promise<Client> {
    if (this.#crashes > 0) await sleep(Math.min(MAX_BACKOFF_MS, BACKOFF_MS * 2 ** (this.#crashes - 1)), signal);
    const spec = this.spec;
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    this.#open.add(client);
    let transport: StdioClientTransport | StreamableHTTPClientTransport;
    if (spec.transport === 'stdio') {
      const [command, ...args] = spec.command as [string, ...string[]];
      const stdio = new StdioClientTransport({ command, args, cwd: spec.cwd, env: { ...getDefaultEnvironment(), ...spec.env }, stderr: 'pipe' });
      stdio.stderr?.on('data', (chunk: Buffer) => {
        this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-STDERR_TAIL);
      });
      transport = stdio;
    } else {
      transport = new StreamableHTTPClientTransport(new URL(spec.url), spec.headers ? { requestInit: { headers: { ...spec.headers } } } : undefined);
    }
    client.onclose = () => {
      this.#open.delete(client);
      // A client that closes while current is a crash: the next call restarts the server.
      if (!this.#closed && this.#ready !== undefined) {
        this.#crashes++;
        this.#ready = undefined;
      }
    };
    try {
      await client.connect(transport, { timeout: spec.startupTimeoutMs, ...(signal ? { signal } : {}) });
      this.#tools = (await client.request({ method: 'tools/list' }, ListToolsResultSchema, { timeout: spec.startupTimeoutMs, ...(signal ? { signal } : {}) })).tools;
    } catch (err) {
      this.#open.delete(client);
      await client.close().catch(() => undefined);
      if (signal?.aborted) throw signal.reason;
      const where = spec.transport === 'stdio' ? `'${spec.command.join(' ')}'` : spec.url;
      throw new ToolError('TOOL_CRASHED', spec.name, `MCP server '${spec.name}' (${where}) did not initialize: ${err instanceof McpError && err.code === ErrorCode.RequestTimeout ? `no answer in ${spec.startupTimeoutMs} ms` : describeError(err)}${this.#tail()}`, {
        cause: err,
        hint: spec.transport === 'stdio' ? 'Run the command by hand in the env folder to see it start; check mcp_servers in env.json.' : 'Check that the server is up and that the URL is its Streamable HTTP endpoint (often /mcp).',
      });
    }
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      const before = this.#tools;
      this.#tools = (await client.request({ method: 'tools/list' }, ListToolsResultSchema)).tools;
      this.#options.onToolsChanged?.(before, this.#tools);
    });
    return client;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    this.#ready = undefined;
    await Promise.all([...this.#open].map((c) => c.close().catch(() => undefined)));
    this.#open.clear();
  }
}

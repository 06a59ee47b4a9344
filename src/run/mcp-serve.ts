/**
 * An env as an MCP server (`agent mcp-serve <env-dir>`): an MCP client (an IDE agent, Claude
 * Desktop) acts in the environment, and the toolkit records and rewards what it does exactly as
 * for any policy. Under the hood it is a {@link Run} whose policy is the client: each `tools/call`
 * becomes the next step of the current episode, answered when that step settles (observation,
 * reward, done). The tools are the actions enabled in the current state (the list changes with
 * the state, announced by `notifications/tools/list_changed`) plus `reset`, which ends the episode
 * and starts the next; the state is the resource `env://state`.
 * A call the env would refuse (unknown or disabled action, params that break the schema) is
 * answered with `isError` without touching the episode.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { AvailableAction } from '../env/agent-instance.js';
import { actionTool } from '../env/action-tool.js';
import type { Observation, Policy } from './policy.js';
import { Run } from './run.js';
import type { RunSummary } from './run-summary.js';
import { RESET_TOOL, STATE_URI, type McpServeOptions } from './mcp-serve-options.js';
import { LineTransport } from '../server/mcp-stdio.js';
import { raceAbort } from '../shared/abort.js';
import { validate } from '../schema/ajv.js';
import { formatIssues } from '../shared/errors.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { MCP_SERVE_DEFAULTS } from '../shared/defaults.js';


interface Pending {
  readonly name: string;
  readonly args: JsonObject;
  readonly answer: (result: CallToolResult) => void;
}


const text = (value: unknown): CallToolResult['content'] => [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) }];
const refuse = (message: string): CallToolResult => ({ content: text(message), isError: true });

/** Serves the env on `transport` (not exported: its type is the SDK's) until the client goes away or `signal` aborts; resolves with the run's summary. */
async function serveEnvOverMcp(transport: Transport, options: McpServeOptions, signal?: AbortSignal): Promise<RunSummary> {
  const queue: Pending[] = [];
  let wake: (() => void) | undefined;
  let latest: Observation | undefined;
  /** The call whose step is in flight, answered when it settles. */
  let inFlight: Pending | undefined;
  /** A reset waiting for the next episode's first observation. */
  let resetting: Pending | undefined;
  /** Resolves with the first observation: a client that lists tools right after initializing must see the actions, not only reset. */
  let firstSeen: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (firstSeen = resolve));

  // The MCP SDK is loaded when an env is served, not with the core.
  const [{ Server }, { CallToolRequestSchema, ListResourcesRequestSchema, ListToolsRequestSchema, ReadResourceRequestSchema }] = await Promise.all([import('@modelcontextprotocol/sdk/server/index.js'), import('@modelcontextprotocol/sdk/types.js')]);
  const server = new Server({ name: `agentic-rl-toolkit: ${options.env}`, version: '0.1.0' }, { capabilities: { tools: { listChanged: true }, resources: {} }, instructions: 'An RL environment recorded by agentic-rl-toolkit: each tool call is a step of the current episode; reset starts a new one. Read env://state for the state.' });
  const toolsOf = (actions: readonly AvailableAction[]): Tool[] => [
    ...actions.map(actionTool).map((t) => ({ name: t.name, ...(t.description ? { description: t.description } : {}), inputSchema: t.parameters as Tool['inputSchema'] })),
    { name: RESET_TOOL, description: 'End the current episode and start the next one from an initial state; returns that state.', inputSchema: { type: 'object' as const, properties: {} } },
  ];
  const names = (): string => (latest?.actions ?? []).map((a) => a.name).join(',');

  const policy: Policy = async (obs, ctx) => {
    const before = latest === undefined ? undefined : names();
    latest = obs;
    firstSeen();
    // Only a change is announced: the first list is what the client asks for after initializing.
    if (before !== undefined && names() !== before) await server.sendToolListChanged().catch(() => undefined);
    if (resetting) {
      resetting.answer({ content: text({ episode: obs.episode, state: obs.state }), structuredContent: { episode: obs.episode, state: obs.state } });
      resetting = undefined;
    }
    for (;;) {
      while (queue.length === 0) {
        ctx.signal.throwIfAborted();
        await new Promise<void>((resolve) => {
          const done = (): void => {
            ctx.signal.removeEventListener('abort', done);
            wake = undefined;
            resolve();
          };
          wake = done;
          ctx.signal.addEventListener('abort', done, { once: true });
        });
      }
      const call = queue.shift() as Pending;
      if (call.name === RESET_TOOL) {
        resetting = call;
        return null;
      }
      const action = obs.actions.find((a) => a.name === call.name);
      if (!action) {
        call.answer(refuse(`'${call.name}' is not available in the current state: call one of ${[...obs.actions.map((a) => a.name), RESET_TOOL].join(', ')}`));
        continue;
      }
      const issues = validate(action.parameters, call.args);
      if (issues.length > 0) {
        call.answer(refuse(`params of '${call.name}' do not match its schema (nothing was done):\n${formatIssues(issues)}`));
        continue;
      }
      inFlight = call;
      return { name: call.name, params: call.args };
    }
  };

  const run = await Run.prepare({ ...options, episodes: options.episodes ?? MCP_SERVE_DEFAULTS.episodes, maxSteps: options.maxSteps ?? MCP_SERVE_DEFAULTS.maxSteps, policy, concurrency: 1 });
  const onReady = options.onReady;
  const offStarted = onReady ? run.events.on('run_started', (e) => onReady(e.dir)) : undefined;
  const offSettled = run.events.on('trace_settled', (e) => {
    const call = inFlight;
    inFlight = undefined;
    if (!call) return;
    const result = { observation: e.observation ?? null, reward: e.reward, done: e.done, step: e.step, trace_id: e.trace_id } satisfies Record<string, JsonValue>;
    call.answer(e.status === 'failed' ? { content: text(`${e.error?.code ?? 'FAILED'}: ${e.error?.message ?? 'the step failed'}`), structuredContent: result, isError: true } : { content: text(e.observation ?? null), structuredContent: result });
  });

  server.setRequestHandler(ListToolsRequestSchema, async (_req, extra) => {
    if (latest === undefined) await raceAbort(first, AbortSignal.any([stop.signal, extra.signal])).catch(() => undefined);
    return { tools: toolsOf(latest?.actions ?? []) };
  });
  server.setRequestHandler(CallToolRequestSchema, (req, extra) => {
    if (stop.signal.aborted) return refuse('the environment is shutting down');
    if (extra.signal.aborted) return refuse('cancelled by the client before it ran');
    return new Promise<CallToolResult>((answer) => {
      const call: Pending = { name: req.params.name, args: (req.params.arguments ?? {}) as JsonObject, answer };
      queue.push(call);
      // notifications/cancelled: a call still queued never runs (one already dispatched runs to its end: its step is recorded).
      extra.signal.addEventListener(
        'abort',
        () => {
          const at = queue.indexOf(call);
          if (at === -1) return;
          queue.splice(at, 1);
          answer(refuse('cancelled by the client before it ran'));
        },
        { once: true },
      );
      wake?.();
    });
  });
  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: [{ uri: STATE_URI, name: 'state', description: "The current episode's state", mimeType: 'application/json' }] }));
  server.setRequestHandler(ReadResourceRequestSchema, (req) => ({ contents: [{ uri: req.params.uri, mimeType: 'application/json', text: JSON.stringify(latest?.state ?? null, null, 2) }] }));

  // The client leaving ends the run (gracefully: what was recorded stays a valid run folder).
  const stop = new AbortController();
  server.onclose = () => stop.abort();
  const onAbort = (): void => stop.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await server.connect(transport);
    return await run.execute(stop.signal);
  } finally {
    offSettled();
    offStarted?.();
    signal?.removeEventListener('abort', onAbort);
    for (const call of queue.splice(0)) call.answer(refuse('the environment stopped'));
    inFlight?.answer(refuse('the environment stopped'));
    await server.close().catch(() => undefined);
  }
}

/** The same on this process's stdin and stdout (what an MCP client launches); the run ends when stdin does. */
export async function serveEnvOverStdio(options: McpServeOptions, signal?: AbortSignal): Promise<RunSummary> {
  const ended = new AbortController();
  const onEnd = (): void => ended.abort(new Error('the MCP client closed stdin'));
  process.stdin.once('end', onEnd);
  process.stdin.once('close', onEnd);
  try {
    const { JSONRPCMessageSchema } = await import('@modelcontextprotocol/sdk/types.js');
    const transport = new LineTransport((value) => JSONRPCMessageSchema.safeParse(value));
    return await serveEnvOverMcp(transport, options, signal ? AbortSignal.any([signal, ended.signal]) : ended.signal);
  } finally {
    process.stdin.off('end', onEnd);
    process.stdin.off('close', onEnd);
  }
}

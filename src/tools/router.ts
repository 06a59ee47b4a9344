/**
 * The router: binds every action of an env to an executor (in-process handler, worker thread,
 * subprocess, HTTP endpoint or MCP server), wraps each in its tool's resilience policies, and runs calls.
 * A failing tool fails only its own call: every error is a ToolError naming the tool.
 */
import os from 'node:os';
import { AgentError, isAgentError, ToolError, type AgentError as AgentErrorType, describeError } from '../shared/errors.js';
import { type JsonObject, type JsonValue } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { validate } from '../schema/ajv.js';
import type { ActionDefinition, EnvDefinition, McpToolInfo } from '../schema/definition.js';
import { httpExecutor, inProcessExecutor } from './executors.js';
import { DEFAULT_MAX_OUTPUT_BYTES, subprocessExecutor } from './subprocess.js';
import { handlerNamed, handlersOf, importToolModule } from './module-loader.js';
import { buildPolicyStack, type LiveControllers, type PolicyStack } from './policy.js';
import { TimedAttempt } from './timed-attempt.js';
import { checkToolResult } from './result.js';
import type { EpisodeSandbox, ToolContext, ToolHandler, ToolResult } from './types.js';
import { ProcessPool } from './process-pool.js';
import { WorkerPool } from './worker-pool.js';
import type { McpServers } from './mcp/mcp-tools.js';
import { EpisodeSandboxes } from './episode-sandboxes.js';
import type { SandboxMechanism, SandboxMode } from '../sandbox/sandbox.js';

export interface RouterOptions {
  /** Seeds `createTools` and every trace's `ctx.rng`. */
  readonly seed?: number;
  /** Passed to the tools module's `createTools`. */
  readonly toolOptions?: Readonly<Record<string, JsonValue>>;
  /** Handlers given in code; they take precedence over the env's bindings. */
  readonly handlers?: Readonly<Record<string, ToolHandler>>;
  /** A handler that holds the event loop at least this long is reported (default 100 ms). */
  readonly blockThresholdMs?: number;
  readonly onBlocked?: (tool: string, blockedMs: number, traceId: string) => void;
  /** Caps every tool's timeout (fuzzing must not wait out a hanging tool's full 30 s). */
  readonly maxTimeoutMs?: number;
  /** An MCP server's tool list changed while the env was open. */
  readonly onMcpToolsChanged?: (server: string, before: readonly McpToolInfo[], after: readonly McpToolInfo[]) => void;
  /** A traced run: each call's W3C `traceparent`, by our trace id (`ctx.traceparent`). */
  readonly traceparent?: (traceId: string) => string;
  /** How an env's sandbox runs its commands: `isolated` (default), or `unsafe-host` (no isolation) only when asked for by name. */
  readonly sandbox?: SandboxMode;
}

export interface ToolCall {
  readonly params: JsonObject;
  readonly state: JsonValue;
  readonly traceId: string;
  readonly instanceId: string;
  /** Aborting it cancels the call; the caller then also aborts the controllers in `live`. */
  readonly signal: AbortSignal;
  /** Controllers of this caller's attempts in flight (see policy.ts: cheaper than a listener each). */
  readonly live?: LiveControllers;
}

/** Takes a call's outcome (an env instance's trace: one object per call, no closure). */
export interface OutcomeSink {
  toolSettled(outcome: ToolCallOutcome): void;
}

/** A call's outcome. Tool failures are values, not exceptions: they belong to one trace. */
export type ToolCallOutcome =
  | {
      readonly ok: true;
      readonly result: ToolResult;
      readonly attempts: number;
      /** Set when the result came from the tool's fallback: the error that triggered it, and what answered. */
      readonly fallback?: { readonly error: AgentErrorType; readonly by: 'observation' | string };
    }
  | { readonly ok: false; readonly error: AgentErrorType; readonly attempts: number };

interface Route {
  readonly action: ActionDefinition;
  /** `ctx.rngSeed` is computed on first read; only the worker route reads it (to seed ctx.rng over there). */
  /** The handler's value: a result, or a promise of one (a synchronous throw is the call's failure). */
  readonly run: (params: JsonObject, ctx: ToolContext & { readonly rngSeed: number }) => unknown;
  readonly policies: PolicyStack;
  /** Waits for the route's resources (a ready worker, a started MCP server) before the call's clock starts. */
  readonly prepare?: (signal: AbortSignal, instanceId: string) => Promise<void>;
}

/** A tool call whose handler has not returned yet, even if its trace was settled (cancelled) already. */
export interface RunningCall {
  readonly tool: string;
  readonly traceId: string;
}

export class ToolRouter implements AsyncDisposable {
  readonly #routes = new Map<string, Route>();
  /** Worker and process pools, closed with the router. */
  readonly #disposables: AsyncDisposable[] = [];
  readonly #attempts: AttemptShared;
  readonly #maxTimeoutMs: number | undefined;
  #mcp: McpServers | undefined;

  private constructor(seed: number, maxTimeoutMs: number | undefined, traceparent: ((traceId: string) => string) | undefined, sandboxes: EpisodeSandboxes | undefined) {
    this.#attempts = { seed, traceparent, running: new RunningAttempts(), sandboxes };
    if (sandboxes) this.#disposables.push(sandboxes);
    this.#maxTimeoutMs = maxTimeoutMs;
  }

  /** Bind every action. Throws TOOL_NOT_FOUND listing every action that has no tool. */
  static async create(def: EnvDefinition, options: RouterOptions = {}): Promise<ToolRouter> {
    const seed = options.seed ?? 0;
    // Checked here, at env load: an env whose tools need a sandbox never runs them without one.
    const sandboxes = def.sandbox ? await EpisodeSandboxes.open(def.sandbox, options.sandbox ? { mode: options.sandbox } : {}) : undefined;
    const router = new ToolRouter(seed, options.maxTimeoutMs, options.traceparent, sandboxes);
    const config = { seed, options: options.toolOptions ?? {} };
    const threshold = options.blockThresholdMs ?? 100;
    const moduleHandlers = new Map<string, Promise<Record<string, unknown>>>();
    const unbound: string[] = [];
    // The MCP SDK is loaded only by envs that have MCP servers.
    if (def.mcpServers && def.mcpServers.size > 0) {
      const mcp = await import('./mcp/mcp-tools.js');
      const onToolsChanged = options.onMcpToolsChanged;
      router.#mcp = new mcp.McpServers(def.mcpServers, onToolsChanged ? { onToolsChanged } : {});
      router.#disposables.push(router.#mcp);
    }
    try {
      for (const action of def.actions.values()) {
        const tool = action.name;
        let run: Route['run'] | undefined;
        let prepare: Route['prepare'];
        const given = options.handlers?.[tool];
        const binding = action.binding;
        if (given || (binding?.kind === 'module' && action.policy.isolate !== 'worker')) {
          let handler = given;
          if (!handler && binding?.kind === 'module') {
            let hs = moduleHandlers.get(binding.module);
            if (!hs) {
              hs = importToolModule(binding.module).then((ns) => handlersOf(ns, config));
              moduleHandlers.set(binding.module, hs);
            }
            handler = handlerNamed(await hs, binding.exportName, binding.module);
          }
          run = inProcessExecutor(handler as ToolHandler, (ms, ctx) => {
            if (ms >= threshold) options.onBlocked?.(tool, ms, ctx.traceId);
          });
        } else if (binding?.kind === 'module') {
          const pool = new WorkerPool(tool, binding.module, binding.exportName, config, action.policy.concurrency ?? os.availableParallelism());
          router.#disposables.push(pool);
          await pool.warm();
          run = (params, ctx) => pool.run(params, ctx, ctx.rngSeed);
          prepare = (signal) => pool.whenReady(signal);
        } else if (binding?.kind === 'subprocess' && binding.persistent) {
          const pool = new ProcessPool(tool, binding.command, { cwd: binding.cwd, env: binding.env, maxOutputBytes: binding.maxOutputBytes }, action.policy.concurrency ?? 2);
          router.#disposables.push(pool);
          run = (params, ctx) => pool.run(params, ctx);
        } else if (binding?.kind === 'subprocess') {
          run = subprocessExecutor(tool, binding.command, { cwd: binding.cwd, env: binding.env, maxOutputBytes: binding.maxOutputBytes });
        } else if (binding?.kind === 'http') {
          run = httpExecutor(tool, binding.url, binding.headers, binding.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
        } else if (binding?.kind === 'sandbox' && sandboxes) {
          run = sandboxes.executor(binding.command, binding.stdin, binding.limits);
        } else if (binding?.kind === 'mcp' && router.#mcp) {
          await router.routeMcpAction(action);
          continue;
        }
        if (!run) {
          unbound.push(tool);
          continue;
        }
        if (sandboxes) {
          const inner = run;
          run = async (params, ctx) => sandboxes.finish(ctx, await inner(params, ctx));
        }
        router.#routes.set(tool, { action, run, policies: router.#policies(action), ...(prepare ? { prepare } : {}) });
      }
    } catch (err) {
      await router[Symbol.asyncDispose]();
      throw err;
    }
    if (unbound.length > 0) {
      await router[Symbol.asyncDispose]();
      throw new AgentError('TOOL_NOT_FOUND', `no tool for action${unbound.length > 1 ? 's' : ''} ${unbound.map((n) => `'${n}'`).join(', ')}`, {
        hint: `Add a tools module (tools.ts) to ${def.dir} exporting a handler per action, or bind them to a command or URL in env.json.`,
      });
    }
    return router;
  }

  /**
   * Start one call; `sink` receives its outcome exactly once, never before `start` returns.
   * A tool with no bulkhead, retry, breaker, fallback or resource to wait for runs as one
   * {@link ToolAttempt} and nothing else: no promise of ours, no async frame (the step path of
   * thousands of agents at once; bench/cold-start.bench.ts). Every other tool goes through `call`.
   */
  start(tool: string, call: ToolCall, sink: OutcomeSink): void {
    const route = this.#routes.get(tool);
    if (route && route.policies.plain && !route.prepare && !route.action.policy.fallback) {
      new ToolAttempt(this.#attempts, route, call, 1, sink).begin();
      return;
    }
    void this.call(tool, call).then((outcome) => sink.toolSettled(outcome));
  }

  /** Run one call through the tool's policies, then its fallback if it still fails. Never rejects. */
  async call(tool: string, call: ToolCall): Promise<ToolCallOutcome> {
    const route = this.#routes.get(tool);
    if (!route) return { ok: false, error: new ToolError('TOOL_NOT_FOUND', tool, 'no such tool'), attempts: 0 };
    let attempts = 0;
    try {
      if (route.prepare) await route.prepare(call.signal, call.instanceId);
      const raw = await route.policies.layered(() => {
        attempts += 1;
        const attempt = attempts;
        return new Promise((resolve, reject) => new ToolAttempt(this.#attempts, route, call, attempt, (ok, value) => (ok ? resolve(value) : reject(value))).begin());
      }, call.signal);
      return checkedResult(tool, raw, attempts);
    } catch (err) {
      const error = isAgentError(err) ? err : new ToolError('TOOL_FAILED', tool, describeError(err), { cause: err });
      const fallback = route.action.policy.fallback;
      // A contract violation is a bug in the tool, not an outage: a fallback would hide it.
      if (!fallback || call.signal.aborted || error.code === 'TOOL_CONTRACT') return { ok: false, error, attempts };
      if ('observation' in fallback) return { ok: true, result: { observation: fallback.observation }, attempts, fallback: { error, by: 'observation' } };
      const target = this.#routes.get(fallback.action);
      if (!target || validate(target.action.parameters, call.params).length > 0) return { ok: false, error, attempts };
      const outcome = await this.call(fallback.action, call);
      return Object.assign({}, outcome, { attempts: attempts + outcome.attempts }, outcome.ok ? { fallback: { error, by: fallback.action } } : {});
    }
  }

  /**
   * Routes an action that appeared while the env was open (a tool an MCP server added), or takes an
   * action's new definition (new parameters): its policies and connection stay.
   */
  async routeMcpAction(action: ActionDefinition): Promise<void> {
    const binding = action.binding;
    if (binding?.kind !== 'mcp' || !this.#mcp) return;
    const known = this.#routes.get(action.name);
    if (known) {
      this.#routes.set(action.name, Object.assign({}, known, { action }));
      return;
    }
    const { mcpExecutor } = await import('./mcp/mcp-tools.js');
    const servers = this.#mcp;
    this.#routes.set(action.name, {
      action,
      run: mcpExecutor(action.name, binding, servers),
      prepare: async (signal, instanceId) => void (await servers.connection(binding.server, instanceId).tools(signal)),
      policies: this.#policies(action),
    });
  }

  /** The action's resilience policies, its timeout capped by `maxTimeoutMs`. */
  #policies(action: ActionDefinition): PolicyStack {
    const cap = this.#maxTimeoutMs;
    return buildPolicyStack(action.name, cap === undefined ? action.policy : Object.assign({}, action.policy, { timeoutMs: Math.min(action.policy.timeoutMs ?? cap, cap) }));
  }

  /** An instance is gone: the MCP servers it started for itself (`per_instance`) are closed, its sandbox workspace removed. */
  async releaseInstance(instanceId: string): Promise<void> {
    await Promise.all([this.#mcp?.releaseInstance(instanceId), this.#attempts.sandboxes?.release(instanceId)]);
  }

  /** The env's sandbox, when it declares one: how it isolates and bounds commands. */
  get sandbox(): SandboxMechanism | undefined {
    return this.#attempts.sandboxes?.mechanism;
  }

  /** The instance's episode sandbox, when the env declares one, for code that drives the episode from outside. */
  instanceSandbox(instanceId: string, state: () => JsonValue): EpisodeSandbox | undefined {
    return this.#attempts.sandboxes?.forInstance(instanceId, state);
  }

  /** An instance starts a new episode: its sandbox workspace is wiped (a new one is seeded at its first command). */
  async resetInstance(instanceId: string): Promise<void> {
    await this.#attempts.sandboxes?.reset(instanceId);
  }

  /** Calls whose handler is still running: after a cancellation, the ones that ignore their AbortSignal. */
  running(): RunningCall[] {
    return [...this.#attempts.running].map((a) => ({ tool: a.ctx.tool, traceId: a.ctx.traceId }));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    // A handler that ignores its signal must not hold a closed env's process open until its timeout.
    for (const route of this.#routes.values()) route.policies.deadlines?.clear();
    await Promise.all(this.#disposables.splice(0).map((p) => p[Symbol.asyncDispose]()));
  }
}

/** A handler's return value checked against the contract: a breach fails only this call. */
function checkedResult(tool: string, raw: unknown, attempts: number): ToolCallOutcome {
  try {
    return { ok: true, result: checkToolResult(raw, tool), attempts };
  } catch (err) {
    return { ok: false, error: err as AgentErrorType, attempts };
  }
}

/** What every attempt of one router shares. */
interface AttemptShared {
  readonly seed: number;
  readonly traceparent: ((traceId: string) => string) | undefined;
  /** Handlers not settled yet, so that closing can name the calls that ignore their signal. */
  readonly running: RunningAttempts;
  /** The env's episode sandboxes (`ctx.sandbox`), when it declares one. */
  readonly sandboxes: EpisodeSandboxes | undefined;
}

/**
 * The attempts whose handler has not settled, as a list threaded through the attempts
 * themselves: a Set's add and delete per call churn its hash table (bench/cold-start.bench.ts).
 */
class RunningAttempts {
  head: ToolAttempt | undefined;

  add(a: ToolAttempt): void {
    a.next = this.head;
    if (this.head) this.head.prev = a;
    this.head = a;
  }

  delete(a: ToolAttempt): void {
    if (a.prev) a.prev.next = a.next;
    else if (this.head === a) this.head = a.next;
    else return;
    if (a.next) a.next.prev = a.prev;
    a.prev = a.next = undefined;
  }

  *[Symbol.iterator](): Generator<ToolAttempt> {
    for (let a = this.head; a; a = a.next) yield a;
  }
}

/** One attempt of a tool call: its handler's context, its deadline, its place among the running handlers. */
class ToolAttempt extends TimedAttempt {
  readonly ctx: CallContext;
  /** Neighbours in {@link RunningAttempts}. */
  prev: ToolAttempt | undefined;
  next: ToolAttempt | undefined;
  readonly #shared: AttemptShared;
  readonly #route: Route;
  readonly #call: ToolCall;
  /** The call's sink (a lone attempt: the outcome is built here), or the raw result's taker (an attempt under cockatiel's layers). */
  readonly #to: OutcomeSink | ((ok: boolean, value: unknown) => void);

  constructor(shared: AttemptShared, route: Route, call: ToolCall, attempt: number, to: OutcomeSink | ((ok: boolean, value: unknown) => void)) {
    super(call.signal, call.live, route.policies.deadlines, route.policies.timeoutError);
    this.#shared = shared;
    this.#route = route;
    this.#call = call;
    this.#to = to;
    this.ctx = new CallContext(route.action.name, call, this, attempt, shared);
  }

  begin(): void {
    this.#shared.running.add(this);
    this.start();
  }

  protected invoke(): unknown {
    return this.#route.run(this.#call.params, this.ctx);
  }

  /** @internal The context's signal. */
  signal(): AbortSignal {
    return this.attemptSignal();
  }

  protected override handlerSettled(): void {
    this.#shared.running.delete(this);
  }

  protected settle(ok: boolean, value: unknown): void {
    const to = this.#to;
    if (typeof to === 'function') to(ok, value);
    else to.toolSettled(ok ? checkedResult(this.ctx.tool, value, 1) : { ok: false, error: this.#route.policies.classify(value, this.#call.signal) as AgentErrorType, attempts: 1 });
  }
}

/**
 * The handler's context. `signal` and `rng` are built on first use: most in-process handlers
 * read neither, and an AbortController or a seeded generator per call is measurable (bench/).
 * A class, so that its getters live on the prototype instead of being three new closures per call.
 */
class CallContext implements ToolContext {
  readonly state: JsonValue;
  readonly traceId: string;
  readonly instanceId: string;
  readonly tool: string;
  readonly attempt: number;
  readonly #owner: ToolAttempt;
  readonly #shared: AttemptShared;
  #rng: Rng | undefined;
  #seed: number | undefined;

  constructor(tool: string, call: ToolCall, owner: ToolAttempt, attempt: number, shared: AttemptShared) {
    this.tool = tool;
    this.attempt = attempt;
    this.#owner = owner;
    this.#shared = shared;
    this.state = call.state;
    this.traceId = call.traceId;
    this.instanceId = call.instanceId;
  }

  get signal(): AbortSignal {
    return this.#owner.signal();
  }

  get rngSeed(): number {
    this.#seed ??= (hashSeed(this.#shared.seed, this.instanceId, this.traceId) + this.attempt) >>> 0;
    return this.#seed;
  }

  get rng(): Rng {
    this.#rng ??= new Rng(this.rngSeed);
    return this.#rng;
  }

  /** Computed when read: only tools that pass it on (HTTP, subprocess, MCP) pay for the hash. */
  get traceparent(): string | undefined {
    return this.#shared.traceparent?.(this.traceId);
  }

  get sandbox(): EpisodeSandbox | undefined {
    return this.#shared.sandboxes?.forCall(this);
  }
}

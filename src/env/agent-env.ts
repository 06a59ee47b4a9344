/**
 * An environment: one definition, one tool router and one state store shared by any number of
 * agent instances in this process. Close it (`await using env = ...` or
 * `await env[Symbol.asyncDispose]()`) to cancel calls in flight and stop worker threads.
 *
 * @example
 * await using env = await AgentEnv.open('fixtures/weather', { toolOptions: { latency_scale: 0 } });
 * const agent = env.createInstance();
 * await agent.reset({ user_location: '上海' });
 * const traceId = agent.dispatch({ name: 'get_weather', params: { city: '上海' } });
 * const { state, reward, done, info } = await agent.resolve(traceId, { timeoutMs: 1000 });
 */
import { setMaxListeners } from 'node:events';
import type { LoadEnvOptions } from '../schema/load-env.js';
import { loadEnvDefinition } from './load-env.js';
import type { ActionDefinition, EnvDefinition, McpToolInfo } from '../schema/definition.js';
import { refreshImported } from '../schema/mcp-imports.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { Emitter } from '../shared/emitter.js';
import { AgentError, describeError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { MemoryStateStore } from '../state/memory-store.js';
import type { StateStore, StateStoreOptions } from '../state/store.js';
import { ToolRouter } from '../tools/router.js';
import type { ToolHandler } from '../tools/types.js';
import { AgentInstance, type InstanceHooks } from './agent-instance.js';
import type { EnvEvent, EnvEventOf } from '../events/env-events.js';
import { diffSchema } from '../diff/diff.js';
import { watchEventLoop } from './loop-monitor.js';
import type { EnvRuntime } from './runtime.js';
import type { SandboxMechanism, SandboxMode } from '../sandbox/sandbox.js';
import { StateValidator } from '../schema/state-validator.js';
import { EnvRewards } from '../reward/env-rewards.js';

/** How an env is opened: its store, clock, seed, tool options, handlers given in code, the event-loop watch and its threshold, tool timeouts, and trace propagation. */
export interface EnvOptions {
  /** Where state histories live. Default: a MemoryStateStore owned (and closed) by the env. */
  readonly store?: StateStore;
  /** Options of the default memory store. */
  readonly storeOptions?: StateStoreOptions;
  readonly clock?: Clock;
  /** Seeds the tools (`createTools`) and every trace's `ctx.rng`. Default 0. */
  readonly seed?: number;
  readonly toolOptions?: Readonly<Record<string, JsonValue>>;
  /** Handlers given in code, by action name; they take precedence over the folder's tools. */
  readonly handlers?: Readonly<Record<string, ToolHandler>>;
  /** Report handlers that hold the event loop this long (default 100 ms) with a `loop_blocked` event. */
  readonly blockThresholdMs?: number;
  /** Cap every tool's timeout (used by `agent fuzz`). */
  readonly maxToolTimeoutMs?: number;
  /**
   * Watch the event loop for lag the per-call timing cannot attribute (blocking after an `await`)
   * and report it as `loop_lag` with the calls in flight. Uses `blockThresholdMs`. Default off.
   */
  readonly watchEventLoop?: boolean;
  /** A traced run: each call's W3C `traceparent` by our trace id, handed to its tool (`ctx.traceparent`). */
  readonly traceparent?: (traceId: string) => string;
  /** How the env's sandbox (env.json `sandbox`) runs commands: `isolated` (default; SANDBOX_UNAVAILABLE at open where it cannot), or `unsafe-host`, with no isolation, only when asked for by name. */
  readonly sandbox?: SandboxMode;
}

/** Finished calls a `loop_lag` report can name (the most recent ones). */
const RECENT_CALLS = 1_024;

/** An env loaded from its folder (or defined in code): creates the instances episodes run on, routes their tool calls, collects rewards and emits what happens. Dispose it to cancel calls in flight. */
export class AgentEnv implements AsyncDisposable {
  readonly definition: EnvDefinition;
  /** Every event of every instance, in order. */
  readonly events: Emitter<EnvEvent>;
  readonly #runtime: EnvRuntime;
  readonly #abort = new AbortController();
  readonly #ownsStore: boolean;
  readonly #instances = new Map<string, AgentInstance>();
  readonly #monitor: Disposable | undefined;
  #closed = false;

  private constructor(definition: EnvDefinition, router: ToolRouter, options: EnvOptions, events: Emitter<EnvEvent>) {
    this.definition = definition;
    this.events = events;
    this.#ownsStore = options.store === undefined;
    // Every call in flight links one listener to this signal (removed when it settles); thousands is normal.
    setMaxListeners(0, this.#abort.signal);
    const clock = options.clock ?? systemClock;
    this.#runtime = {
      definition,
      stateValidator: new StateValidator(definition.stateSchema),
      router,
      store: options.store ?? new MemoryStateStore(options.storeOptions),
      clock,
      events,
      signal: this.#abort.signal,
      rewards: new EnvRewards(definition, { clock, emit: (e) => events.emit(e) }),
    };
    this.#monitor = options.watchEventLoop ? this.#watch(options.blockThresholdMs ?? 100) : undefined;
  }

  #watch(thresholdMs: number): Disposable {
    const clock = this.#runtime.clock;
    const router = this.#runtime.router;
    let lastBlocked = -Infinity;
    // Calls that finished lately, in a ring with no object per call (a run finishes tens of
    // thousands a second): the lag is noticed only after the block, when the call that blocked
    // may already have settled. Calls still running are the router's.
    const ring = { traces: new Array<string>(RECENT_CALLS), tools: new Array<string>(RECENT_CALLS), at: new Float64Array(RECENT_CALLS).fill(-Infinity), next: 0 };
    this.events.on('tool_finished', (e) => {
      const i = ring.next;
      ring.traces[i] = e.trace_id;
      ring.tools[i] = e.tool;
      ring.at[i] = performance.now();
      ring.next = (i + 1) % RECENT_CALLS;
    });
    this.events.on('loop_blocked', () => (lastBlocked = performance.now()));
    // Watched while calls come: with none running or started for a second, the monitor sleeps until the next.
    let started = 0;
    let seen = 0;
    const monitor = watchEventLoop({
      thresholdMs,
      busy: () => {
        const busy = started !== seen || router.running().length > 0;
        seen = started;
        return busy;
      },
      onLag: (lagMs) => {
        const now = performance.now();
        // A block the router already named (it ended just now) needs no second, vaguer report.
        if (now - lastBlocked <= lagMs + 50) return;
        const since = now - lagMs - 50;
        const inFlight = router.running().map(({ traceId, tool }) => ({ trace_id: traceId, tool }));
        for (let k = 0; k < RECENT_CALLS; k++) {
          const i = (ring.next + k) % RECENT_CALLS;
          if ((ring.at[i] as number) >= since) inFlight.push({ trace_id: ring.traces[i] as string, tool: ring.tools[i] as string });
        }
        this.events.emit({ type: 'loop_lag', time: clock.now(), instance_id: '', lag_ms: lagMs, in_flight: inFlight });
      },
    });
    this.events.on('tool_started', () => {
      started++;
      monitor.wake();
    });
    return monitor;
  }

  /** Load an env folder and bind its tools. */
  static async open(dir: string, options: EnvOptions & LoadEnvOptions = {}): Promise<AgentEnv> {
    return AgentEnv.create(await loadEnvDefinition(dir, options), options);
  }

  /** Build an env from a loaded definition. */
  static async create(definition: EnvDefinition, options: EnvOptions = {}): Promise<AgentEnv> {
    const clock = options.clock ?? systemClock;
    // Listener errors must not break the core; they surface as `error` events (guarded against recursion).
    const events: Emitter<EnvEvent> = new Emitter<EnvEvent>((err, event) => {
      if (event.type !== 'error') events.emit({ type: 'error', time: clock.now(), instance_id: event.instance_id, error: { code: 'INTERNAL', message: `event listener threw on ${event.type}: ${describeError(err)}` } });
    });
    const router = await ToolRouter.create(definition, {
      ...(options.seed !== undefined ? { seed: options.seed } : {}),
      ...(options.toolOptions ? { toolOptions: options.toolOptions } : {}),
      ...(options.handlers ? { handlers: options.handlers } : {}),
      ...(options.blockThresholdMs !== undefined ? { blockThresholdMs: options.blockThresholdMs } : {}),
      ...(options.maxToolTimeoutMs !== undefined ? { maxTimeoutMs: options.maxToolTimeoutMs } : {}),
      ...(options.traceparent ? { traceparent: options.traceparent } : {}),
      ...(options.sandbox ? { sandbox: options.sandbox } : {}),
      // Called only once the env is open, so `refreshActions` (below) is defined by then.
      onMcpToolsChanged: (server, before, after) =>
        void refreshActions(server, before, after).catch((err: unknown) => events.emit({ type: 'error', time: clock.now(), instance_id: '', error: { code: 'INTERNAL', message: `refreshing the actions of MCP server '${server}' failed: ${describeError(err)}` } })),
      onBlocked: (tool, blockedMs, traceId) => {
        const instanceId = traceId.slice(0, traceId.lastIndexOf(':'));
        events.emit({ type: 'loop_blocked', time: clock.now(), instance_id: instanceId, trace_id: traceId, tool, blocked_ms: blockedMs });
      },
    });
    // Actions imported from a server follow its tool list; the change is reported either way.
    const refreshActions = async (server: string, before: readonly McpToolInfo[], after: readonly McpToolInfo[]): Promise<void> => {
      const change = refreshImported(definition, server, after);
      const actions = definition.actions as Map<string, ActionDefinition>;
      for (const name of change.removed) actions.delete(name);
      for (const action of [...change.added, ...change.changed]) {
        await router.routeMcpAction(action);
        actions.set(action.name, action);
      }
      events.emit({ type: 'mcp_tools_changed', time: clock.now(), instance_id: '', server, ...toolListChange(before, after), actions: { added: change.added.map((a) => a.name), removed: [...change.removed], changed: change.changed.map((a) => a.name) } });
    };
    return new AgentEnv(definition, router, { ...options, clock }, events);
  }

  /** A new agent instance. Ids must be unique within the env; default `agent-<n>`. */
  createInstance(options: { id?: string; hooks?: InstanceHooks } = {}): AgentInstance {
    if (this.#closed) throw new AgentError('ILLEGAL_TRANSITION', 'this env is closed', { hint: 'Open a new env.' });
    const id = options.id ?? `agent-${this.#instances.size + 1}`;
    if (this.#instances.has(id)) throw new AgentError('BAD_USAGE', `an instance '${id}' already exists in this env`, { hint: 'Give each instance its own id.' });
    if (id.includes(':') && options.id !== undefined) throw new AgentError('BAD_USAGE', `instance id '${id}' may not contain ':'`, { hint: 'Trace ids are <instance>:<n>.' });
    const instance = new AgentInstance(id, this.#runtime, options.hooks);
    this.#instances.set(id, instance);
    return instance;
  }

  instance(id: string): AgentInstance | undefined {
    return this.#instances.get(id);
  }

  get instances(): ReadonlyMap<string, AgentInstance> {
    return this.#instances;
  }

  /** Forget a finished instance (its state history stays in the store). */
  release(id: string): void {
    const inst = this.#instances.get(id);
    if (inst && inst.status !== 'terminated' && inst.status !== 'archived') {
      throw new AgentError('ILLEGAL_TRANSITION', `instance '${id}' is ${inst.status}`, { hint: 'terminate() it before releasing it.' });
    }
    this.#instances.delete(id);
    // Its own MCP servers (per_instance) end with it; a failure to close one is no failure of the caller's.
    this.#runtime.router.releaseInstance(id).catch(() => undefined);
  }

  /** How the env's sandbox isolates and bounds commands, when it declares one (env.json `sandbox`). */
  get sandbox(): SandboxMechanism | undefined {
    return this.#runtime.router.sandbox;
  }

  get store(): StateStore {
    return this.#runtime.store;
  }

  /**
   * The env's rewards: deliver delayed values (`submit`), read a step's rewards as they stand
   * (`entries`, `reward`), the SLA per source, and `settle()` to wait for judges still running.
   */
  get rewards(): EnvRewards {
    return this.#runtime.rewards;
  }

  /**
   * Tool calls whose handler has not returned, though their traces may be settled: after `close()`,
   * the handlers that ignored their AbortSignal (they keep the process busy until they finish).
   */
  runningCalls(): { readonly tool: string; readonly traceId: string }[] {
    return this.#runtime.router.running();
  }

  /** Same as `await using`: for callers on plain JavaScript, where Node 20 has no `using`. */
  close(): Promise<void> {
    return this[Symbol.asyncDispose]();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#monitor?.[Symbol.dispose]();
    this.#abort.abort(new AgentError('TOOL_CANCELLED', 'the env was closed'));
    await Promise.all(
      [...this.#instances.values()].filter((i) => i.status !== 'terminated' && i.status !== 'archived').map((i) => i.terminate('the env was closed')),
    );
    await this.#runtime.rewards[Symbol.asyncDispose]();
    await this.#runtime.router[Symbol.asyncDispose]();
    if (this.#ownsStore) await this.#runtime.store[Symbol.asyncDispose]();
  }
}

/** What changed between two tool lists of a server: names added and removed, and each kept tool's input schema, diffed. */
function toolListChange(before: readonly McpToolInfo[], after: readonly McpToolInfo[]): Pick<EnvEventOf<'mcp_tools_changed'>, 'added' | 'removed' | 'changed'> {
  const old = new Map(before.map((t) => [t.name, t]));
  const now = new Map(after.map((t) => [t.name, t]));
  const changed = [...now.values()].flatMap((t) => {
    const o = old.get(t.name);
    if (!o) return [];
    const findings = diffSchema(o.inputSchema, t.inputSchema, 'action', { subject: t.name }).map((f) => ({ rule: f.rule, severity: f.severity, message: f.message }));
    return findings.length > 0 ? [{ tool: t.name, findings }] : [];
  });
  return { added: [...now.keys()].filter((n) => !old.has(n)), removed: [...old.keys()].filter((n) => !now.has(n)), changed };
}

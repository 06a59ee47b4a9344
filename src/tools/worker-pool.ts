/**
 * A pool of worker threads for one tool declared `isolate: "worker"`. Each worker runs one call
 * at a time; extra calls queue. Cancelling a call (timeout, abort) terminates its worker, the
 * only way to stop CPU-bound JavaScript, and a fresh worker replaces it on demand.
 */
import type { Worker } from 'node:worker_threads';
import { raceAbort } from '../shared/abort.js';
import { siblingModule, startModuleWorker } from '../shared/module-worker.js';
import { AgentError, describeError, ToolError } from '../shared/errors.js';
import type { JsonObject } from '../shared/json.js';
import { plainJson } from '../state/wide-object.js';
import type { ToolContext, ToolModuleConfig } from './types.js';
import type { CallMessage, ReplyMessage } from './worker-entry.js';

const ENTRY = siblingModule(import.meta.url, 'worker-entry');

interface Slot {
  worker: Worker;
  busy: boolean;
  isReady: boolean;
  /** Settles when the worker has loaded its handler (rejects if it could not). */
  ready: Promise<void>;
}

interface Waiter {
  resolve: (slot: Slot) => void;
  reject: (err: unknown) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

export class WorkerPool implements AsyncDisposable {
  readonly #tool: string;
  readonly #data: { moduleFile: string; exportName: string; config: ToolModuleConfig };
  readonly #size: number;
  readonly #slots = new Set<Slot>();
  readonly #waiting: Waiter[] = [];
  #nextId = 0;
  #closed = false;

  constructor(tool: string, moduleFile: string, exportName: string, config: ToolModuleConfig, size: number) {
    this.#tool = tool;
    this.#data = { moduleFile, exportName, config };
    this.#size = Math.max(1, size);
  }

  /** Start one worker and wait until it has loaded the handler, so load errors surface at env creation. */
  async warm(): Promise<void> {
    const slot = [...this.#slots][0] ?? this.#spawn();
    try {
      await slot.ready;
    } catch (err) {
      // At env creation a handler that cannot load is a broken definition, not a failed call.
      throw new AgentError('DEFINITION_INVALID', `tool '${this.#tool}': ${describeError((err as { cause?: unknown }).cause ?? err)}`, {
        cause: err,
        hint: 'Fix the tools module so that it imports cleanly in a worker thread (isolate: "worker").',
      });
    }
  }

  /**
   * Resolves once some worker is ready. The router awaits this before a call's timeout starts,
   * so booting a replacement worker (after a timeout killed one) is not charged to the next call.
   */
  whenReady(signal: AbortSignal): Promise<void> {
    const slots = [...this.#slots];
    if (slots.some((s) => s.isReady)) return Promise.resolve();
    const candidates = slots.length > 0 ? slots : [this.#spawn()];
    return raceAbort(Promise.any(candidates.map((s) => s.ready)), signal).catch((err: unknown) => {
      throw err instanceof AggregateError ? err.errors[0] : err;
    });
  }

  async run(params: JsonObject, ctx: ToolContext, rngSeed: number): Promise<unknown> {
    const slot = await this.#acquire(ctx.signal);
    try {
      await raceAbort(slot.ready, ctx.signal);
    } catch (err) {
      this.#release(slot);
      throw err;
    }
    const id = this.#nextId++;
    const traceparent = ctx.traceparent;
    // Structured clone refuses the Proxy a wide object's edits live in (wide-object.ts): the worker gets plain objects.
    const message: CallMessage = { id, params, state: plainJson(ctx.state), traceId: ctx.traceId, instanceId: ctx.instanceId, tool: this.#tool, attempt: ctx.attempt, rngSeed, ...(traceparent !== undefined ? { traceparent } : {}) };
    try {
      return await new Promise<unknown>((resolve, reject) => {
        const cleanup = (): void => {
          slot.worker.off('message', onMessage);
          slot.worker.off('error', onError);
          slot.worker.off('exit', onExit);
          ctx.signal.removeEventListener('abort', onAbort);
        };
        const onMessage = (reply: ReplyMessage): void => {
          if (reply.id !== id) return;
          cleanup();
          if (reply.ok) resolve(reply.result);
          // A tool's own failure and a contract breach keep their code; anything else is an untyped crash.
          else if (reply.error.code === 'TOOL_FAILED' || reply.error.code === 'TOOL_CONTRACT') reject(new ToolError(reply.error.code, this.#tool, reply.error.message, { retryable: reply.error.retryable }));
          else reject(new ToolError('TOOL_CRASHED', this.#tool, `threw ${reply.error.message}`, { retryable: reply.error.retryable }));
        };
        const onError = (err: Error): void => {
          cleanup();
          this.#discard(slot);
          reject(new ToolError('TOOL_FAILED', this.#tool, `worker crashed: ${err.message}`, { cause: err }));
        };
        const onExit = (code: number): void => {
          cleanup();
          this.#discard(slot);
          reject(new ToolError('TOOL_FAILED', this.#tool, `worker exited with code ${code}`));
        };
        const onAbort = (): void => {
          cleanup();
          this.#discard(slot);
          reject(ctx.signal.reason);
        };
        slot.worker.on('message', onMessage);
        slot.worker.on('error', onError);
        slot.worker.on('exit', onExit);
        ctx.signal.addEventListener('abort', onAbort, { once: true });
        slot.worker.postMessage(message);
      });
    } finally {
      this.#release(slot);
    }
  }

  #spawn(): Slot {
    const worker = startModuleWorker(ENTRY, this.#data);
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: ReplyMessage): void => {
        if (m.id !== -1) return;
        off();
        resolve();
      };
      const onError = (err: Error): void => {
        off();
        reject(new ToolError('TOOL_FAILED', this.#tool, `worker could not load the handler: ${err.message}`, { cause: err }));
      };
      const off = (): void => {
        worker.off('message', onMessage);
        worker.off('error', onError);
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
    });
    // Observed here so that a worker that fails before anyone waits does not raise an unhandled rejection.
    ready.catch(() => undefined);
    const slot: Slot = { worker, busy: false, isReady: false, ready };
    ready.then(() => (slot.isReady = true), () => undefined);
    this.#slots.add(slot);
    return slot;
  }

  #acquire(signal: AbortSignal): Promise<Slot> {
    if (this.#closed) return Promise.reject(new AgentError('TOOL_CANCELLED', `worker pool of '${this.#tool}' is closed`));
    if (signal.aborted) return Promise.reject(signal.reason);
    const idle = [...this.#slots].filter((s) => !s.busy);
    let slot = idle.find((s) => s.isReady) ?? idle[0];
    if (!slot && this.#slots.size < this.#size) slot = this.#spawn();
    if (slot) {
      slot.busy = true;
      return Promise.resolve(slot);
    }
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
          reject(signal.reason);
        },
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  #release(slot: Slot): void {
    slot.busy = false;
    const next = this.#waiting.shift();
    if (!next) return;
    next.signal.removeEventListener('abort', next.onAbort);
    const free = this.#slots.has(slot) ? slot : ([...this.#slots].find((s) => !s.busy) ?? this.#spawn());
    free.busy = true;
    next.resolve(free);
  }

  #discard(slot: Slot): void {
    if (!this.#slots.delete(slot)) return;
    void slot.worker.terminate();
    // Boot the replacement now, so the next call finds a ready worker.
    if (!this.#closed) this.#spawn();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    for (const w of this.#waiting.splice(0)) {
      w.signal.removeEventListener('abort', w.onAbort);
      w.reject(new AgentError('TOOL_CANCELLED', `worker pool of '${this.#tool}' was closed`));
    }
    await Promise.all([...this.#slots].map((s) => s.worker.terminate()));
    this.#slots.clear();
  }
}


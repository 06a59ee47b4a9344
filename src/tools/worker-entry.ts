/**
 * Runs inside a worker thread (see worker-pool.ts): loads one handler of a tools module and
 * answers call messages one at a time. A CPU-bound handler blocks only this thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { handlerNamed, handlersOf, importToolModule } from './module-loader.js';
import { Rng } from '../shared/rng.js';
import type { ToolHandler, ToolModuleConfig } from './types.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import { describeError, isAgentError } from '../shared/errors.js';

interface Setup {
  readonly moduleFile: string;
  readonly exportName: string;
  readonly config: ToolModuleConfig;
}

export interface CallMessage {
  readonly id: number;
  readonly params: JsonObject;
  readonly state: JsonValue;
  readonly traceId: string;
  readonly instanceId: string;
  readonly tool: string;
  readonly attempt: number;
  readonly rngSeed: number;
  readonly traceparent?: string;
}

export type ReplyMessage =
  | { readonly id: -1; readonly ok: true; readonly result: 'ready' }
  | { readonly id: number; readonly ok: true; readonly result: unknown }
  | { readonly id: number; readonly ok: false; readonly error: { message: string; code?: string; retryable: boolean; name: string } };

const setup = (workerData as { data: Setup }).data;
// Load at boot and say so: the pool hands out only ready workers, so start-up never eats into a call's timeout.
const handler: Promise<ToolHandler> = importToolModule(setup.moduleFile)
  .then((ns) => handlersOf(ns, setup.config))
  .then((hs) => handlerNamed(hs, setup.exportName, setup.moduleFile));
handler.then(
  () => parentPort?.postMessage({ id: -1, ok: true, result: 'ready' } satisfies ReplyMessage),
  (err: unknown) => {
    // Crash the worker: the pool reports the load error to whoever waits for it.
    throw err;
  },
);

parentPort?.on('message', (msg: CallMessage) => {
  handler
    .then((h) =>
      h(msg.params, {
        state: msg.state,
        traceId: msg.traceId,
        instanceId: msg.instanceId,
        tool: msg.tool,
        attempt: msg.attempt,
        // The parent terminates this worker to cancel a call, so the signal here never needs to fire.
        signal: new AbortController().signal,
        rng: new Rng(msg.rngSeed),
        ...(msg.traceparent !== undefined ? { traceparent: msg.traceparent } : {}),
      }),
    )
    .then(
      (result) => {
        try {
          parentPort?.postMessage({ id: msg.id, ok: true, result } satisfies ReplyMessage);
        } catch (err) {
          // Not structured-cloneable (a function, a symbol): the tool broke its contract.
          parentPort?.postMessage({ id: msg.id, ok: false, error: { message: `returned a value that cannot leave the worker: ${describeError(err)}`, code: 'TOOL_CONTRACT', retryable: false, name: 'ToolError' } } satisfies ReplyMessage);
        }
      },
      (err: unknown) => {
        parentPort?.postMessage({
          id: msg.id,
          ok: false,
          error: {
            message: isAgentError(err) ? err.message : describeError(err),
            ...(isAgentError(err) ? { code: err.code } : {}),
            retryable: isAgentError(err) && err.retryable,
            name: isAgentError(err) ? err.name : 'Error',
          },
        } satisfies ReplyMessage);
      },
    );
});

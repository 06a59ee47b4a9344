/**
 * One worker thread of a run spread over threads (thread-scheduler.ts): it opens the env and the
 * policy as the run did, runs the episodes the run hands it through the same EpisodeRunner as
 * every other run, and sends back what they commit — events, each episode's record at its end —
 * in one message per turn of its event loop. It writes nothing: the run's own thread keeps the
 * folder, the live view and the summary.
 */
import { setMaxListeners } from 'node:events';
import { parentPort, workerData } from 'node:worker_threads';
import { AgentEnv } from '../env/agent-env.js';
import type { EnvEvent } from '../events/env-events.js';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import { trajectoryLine, type EpisodeRecord } from '../replay/run-writer.js';
import { systemClock } from '../shared/clock.js';
import { AgentError, describeError, isAgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { plainJson } from '../state/wide-object.js';
import { breather, EpisodeRunner, type EpisodeHooks } from './episode-runner.js';
import { envPolicySetup, makePolicy, type RunPolicy } from './policy-factory.js';
import { BATCH_ITEMS, SendWindow, WINDOW } from './send-window.js';
import type { ThreadItem, ThreadSetup, ToThread } from './thread-scheduler.js';

const setup = (workerData as { data: ThreadSetup }).data;
const port = parentPort as NonNullable<typeof parentPort>;

/** Batches the run's thread has not yet written: past WINDOW of them, this thread's episodes wait at their next step. */
const unwritten = new SendWindow(WINDOW);
let outbox: ThreadItem[] = [];
/**
 * Items go out together once per turn of the loop (a message per event would cost more than the
 * event), or once BATCH_ITEMS are waiting: episodes with instant tools run for a whole turn
 * without one, and the window counts batches.
 */
function send(item: ThreadItem): void {
  if (outbox.length === 0) setImmediate(flush);
  outbox.push(item);
  if (outbox.length >= BATCH_ITEMS) flush();
}
function flush(): void {
  if (outbox.length === 0) return;
  const items = outbox;
  outbox = [];
  port.postMessage({ kind: 'items', items });
  unwritten.sent();
}

async function open(): Promise<{ env: AgentEnv; policy: RunPolicy } | undefined> {
  let env: AgentEnv | undefined;
  try {
    env = await AgentEnv.open(setup.envDir, {
      seed: setup.seed,
      clock: systemClock,
      watchEventLoop: true,
      storeOptions: { snapshotEvery: 50, retainDeltas: 1_000 },
      ...(setup.toolOptions ? { toolOptions: setup.toolOptions } : {}),
      ...(setup.rewardSources ? { rewardSources: setup.rewardSources } : {}),
      ...(setup.blockThresholdMs !== undefined ? { blockThresholdMs: setup.blockThresholdMs } : {}),
      ...(setup.sandbox ? { sandbox: setup.sandbox } : {}),
    });
    const policy = await makePolicy(setup.policy, envPolicySetup(env.definition, setup.llm, setup.seed, undefined));
    return { env, policy };
  } catch (err) {
    await env?.[Symbol.asyncDispose]();
    const e = isAgentError(err) ? err : new AgentError('INTERNAL', describeError(err), { cause: err });
    port.postMessage({ kind: 'failed', error: { code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) } });
    return undefined;
  }
}

const opened = await open();
if (opened) {
  const { env, policy } = opened;
  const stop = new AbortController();
  // Every episode in flight listens to it.
  setMaxListeners(0, stop.signal);
  const records = new Map<number, EpisodeRecord>();
  const finals = new Map<number, JsonValue>();
  const emit = (e: RunEvent): void => {
    if (e.type === 'trace_settled') {
      const json = JSON.stringify(e);
      return send({ kind: 'event', json, trajectory: trajectoryLine(setup.runId, e, json) });
    }
    if (e.type !== 'episode_finished') return send({ kind: 'event', json: JSON.stringify(e) });
    const record = records.get(e.episode);
    const final = finals.get(e.episode);
    records.delete(e.episode);
    finals.delete(e.episode);
    send({ kind: 'end', finished: JSON.stringify(e), ...(record ? { record } : {}), ...(final !== undefined ? { final } : {}) });
    policy.ended(e.episode);
  };
  const runner = new EpisodeRunner({ env, policy: policy.policy, clock: systemClock, seed: setup.seed, maxSteps: setup.maxSteps, initialStates: setup.initialStates, emit, breathe: breather(() => unwritten) });
  // A settled step is committed here (its trajectory's offered actions added), as a run in one thread does.
  const forward = (e: EnvEvent | SettledStepEvent): void => emit(e.type === 'trace_settled' ? runner.committed(e) : e);
  env.events.onAny(forward);
  const hooks: EpisodeHooks = {
    // The run's thread writes each episode's initial state from its record.
    initialState: () => undefined,
    settled: forward,
    // A memory store does not fail under an episode.
    storeFailed: () => undefined,
    close: async (record, finished) => {
      // Its final patch may hold pieces of a wide state (Proxies, which structured clone refuses).
      if (record) records.set(finished.episode, { ...record, final_patch: plainJson(record.final_patch as unknown as JsonValue) as unknown as EpisodeRecord['final_patch'] });
      await env.store.drop(finished.instance_id);
      return true;
    },
    // Structured clone refuses a wide object's Proxy: the final state goes as plain objects.
    ...(setup.finalStates ? { ended: (i: number, state: JsonValue) => finals.set(i, plainJson(state)) } : {}),
  };
  let running = 0;
  let finishing = false;
  const done = async (): Promise<void> => {
    // Judges and reward models still working on this thread's steps deliver before it says it is done.
    if (!stop.signal.aborted) await env.rewards.settle(stop.signal).catch(() => undefined);
    await env[Symbol.asyncDispose]();
    await policy.dispose?.();
    flush();
    port.postMessage({ kind: 'done' });
    port.close();
  };
  let closing = false;
  const settleIfOver = (): void => {
    // Once: a stop and then a finish (nothing left to hand out) both come to an interrupted run.
    if (!finishing || running > 0 || closing) return;
    closing = true;
    void done();
  };
  port.on('message', (m: ToThread) => {
    if (m.kind === 'episodes') {
      for (const episode of m.episodes) {
        running++;
        void runner.run(episode, hooks, stop.signal).finally(() => {
          running--;
          settleIfOver();
        });
      }
    } else if (m.kind === 'written') {
      unwritten.answered();
    } else if (m.kind === 'stop') {
      stop.abort(new AgentError('TOOL_CANCELLED', 'the run was interrupted'));
      finishing = true;
      settleIfOver();
    } else {
      finishing = true;
      settleIfOver();
    }
  });
  port.postMessage({ kind: 'ready' });
}

/**
 * The rollouts tests' harness: `agent serve` on fixtures/lookup with a fake vLLM server as its one
 * inference server, a WebSocket client that keeps every message and waits (a minute at most) for
 * the one a test expects, and the lookup task's scripted model. Not shipped.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { startFakeVllmServer, type FakeVllmServer } from '../llm/fake-vllm-server.js';
import type { RunSummary } from '../run/run-summary.js';
import { serveEnv } from './serve.js';
import type { WorkersOptions } from './remote-rollouts.js';

/** What a test started, undone in reverse by `cleanUp` (the test file's `afterEach`). */
export const cleanups: (() => Promise<unknown>)[] = [];

export async function cleanUp(): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) await c();
}

/** Looks the key up, then answers with the code the lookup gave. */
export function lookupModel(prompt: string): string {
  const code = /"code":"(\w+)"\}\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/.exec(prompt)?.[1];
  if (code !== undefined) return `<tool_call>\n{"name": "answer", "arguments": {"code": "${code}"}}\n</tool_call>`;
  const key = [...prompt.matchAll(/the key '([a-z-]+)'/g)].pop()?.[1] ?? 'none';
  return `<tool_call>\n{"name": "lookup_code", "arguments": {"key": "${key}"}}\n</tool_call>`;
}

export async function setup(fake: Parameters<typeof startFakeVllmServer>[0] = { reply: lookupModel }, serving: { readonly agentPrograms?: boolean; readonly rewardSources?: Record<string, unknown>; readonly inferenceUrls?: readonly string[]; readonly workers?: WorkersOptions; readonly store?: string } = {}): Promise<{ model: FakeVllmServer; url: string; dir: string; stop: () => Promise<RunSummary> }> {
  const model = await startFakeVllmServer(fake);
  cleanups.push(async () => model[Symbol.asyncDispose]());
  const out = await mkdtemp(path.join(tmpdir(), 'rollouts-'));
  cleanups.push(() => rm(out, { recursive: true, force: true }));
  const controller = new AbortController();
  let ready!: (v: { url: string; dir: string }) => void;
  const listening = new Promise<{ url: string; dir: string }>((r) => (ready = r));
  // The fake model server is the one inference server rollouts may use (others only when a test adds them).
  const done = serveEnv({ env: 'fixtures/lookup', split: 'train', listen: 0, out, onListening: ready, ...serving, inferenceUrls: [model.url, ...(serving.inferenceUrls ?? [])] }, controller.signal);
  const stop = (): Promise<RunSummary> => {
    controller.abort();
    return done;
  };
  cleanups.push(stop);
  return { model, ...(await listening), stop };
}

export interface Message {
  readonly type: string;
  readonly id?: number;
  readonly data: Record<string, unknown>;
}

/** A client that keeps every message, and waits for the one that ends a request. */
export async function connect(url: string): Promise<{ send(m: object): void; until(pred: (m: Message) => boolean): Promise<Message[]>; close(): void }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
  const inbox: Message[] = [];
  let check: (() => void) | undefined;
  ws.on('message', (raw) => {
    inbox.push(JSON.parse(String(raw)) as Message);
    check?.();
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  cleanups.push(async () => ws.close());
  return {
    send: (m) => ws.send(JSON.stringify(m)),
    // A message that never comes fails the test within a minute, saying what did come, instead of hanging it.
    until: (pred) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          check = undefined;
          reject(new Error(`the awaited message did not come in 60 s; came: ${JSON.stringify(inbox.map((m) => [m.id, m.type])).slice(0, 500)}`));
        }, 60_000);
        check = (): void => {
          const at = inbox.findIndex(pred);
          if (at !== -1) {
            check = undefined;
            clearTimeout(timer);
            resolve(inbox.splice(0, at + 1));
          }
        };
        check();
      }),
    close: () => ws.close(),
  };
}

/** The last message of a rollouts request: its summary, or its error (groups and the acceptance come before). */
export const over = (m: Message, id: number): boolean => m.id === id && m.type !== 'rollout_group' && m.type !== 'rollouts_accepted';
export const ask = (base: string, extra: object = {}): object => ({ task_ids: ['lookup-train-0', 'lookup-train-1'], n: 3, base_url: base, model: 'fake-model', sampling: { temperature: 1, max_tokens: 100 }, ...extra });


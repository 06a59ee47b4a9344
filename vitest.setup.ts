/**
 * A test file that leaves handles open (a timer, a socket, a server, a child process, a worker)
 * fails. Every such resource created while the file runs is tracked with async_hooks; whatever
 * is still alive and keeping the process up when the file ends is reported.
 */
import { createHook } from 'node:async_hooks';
import { afterAll, beforeAll } from 'vitest';

const TRACKED = new Set(['Timeout', 'TCPWRAP', 'TCPSERVERWRAP', 'PROCESSWRAP', 'PIPEWRAP', 'PIPESERVERWRAP', 'WORKER', 'UDPWRAP', 'SIGNALWRAP', 'FSEVENTWRAP']);
const live = new Map<number, { type: string; resource: { hasRef?: () => boolean } }>();
const hook = createHook({
  init(id, type, _trigger, resource) {
    if (!TRACKED.has(type)) return;
    // vitest's timers (hook and test timeouts) and this file's own polling are not the code under
    // test's: judge a timer by its caller, the first frame outside Node's internals and this hook.
    if (type === 'Timeout') {
      const caller = (new Error().stack ?? '').split('\n').slice(2).find((l) => !l.includes('node:'));
      if (caller && /node_modules\/(@vitest|vitest)\/|vitest\.setup\.ts/.test(caller)) return;
    }
    live.set(id, { type, resource: resource as { hasRef?: () => boolean } });
  },
  destroy(id) {
    live.delete(id);
  },
});

function leaks(): string[] {
  const counts = new Map<string, number>();
  for (const { type, resource } of live.values()) {
    if (resource.hasRef?.() === false) continue; // unref'd: does not keep the process alive
    counts.set(type, (counts.get(type) ?? 0) + 1);
  }
  return [...counts].map(([type, n]) => `${type}×${n}`);
}

beforeAll(() => {
  hook.enable();
});

afterAll(async () => {
  // Handles that are closing (a child's pipes, a terminated worker) need a few turns of the loop.
  for (let i = 0; i < 100 && leaks().length > 0; i++) await new Promise((r) => setTimeout(r, 10));
  const left = leaks();
  hook.disable();
  live.clear();
  if (left.length > 0) throw new Error(`this test file left handles open: ${left.join(', ')}`);
});

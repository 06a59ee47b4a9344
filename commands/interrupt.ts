/** Ctrl-C (and SIGTERM) abort a long command gracefully instead of killing it. */
import type { Io } from './io.js';

/**
 * Abort `controller` on SIGINT/SIGTERM until the returned function is called. `on`, not `once`:
 * ink's signal-exit re-raises a signal that no other listener is left to handle, which would kill
 * the process before its output is flushed.
 */
export function abortOnSignals(controller: AbortController, io: Io, message: string): () => void {
  const onSignal = (): void => {
    if (controller.signal.aborted) return;
    io.stderr.write(`\n${message}\n`);
    controller.abort(new Error('interrupted'));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

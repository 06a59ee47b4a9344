/** Ctrl-C (and SIGTERM) abort a long command gracefully instead of killing it. */
import type { Io } from './io.js';
import { core } from './lib.js';

/**
 * Abort `controller` on SIGINT/SIGTERM until the returned function is called. `on`, not `once`:
 * ink's signal-exit re-raises a signal that no other listener is left to handle, which would kill
 * the process before its output is flushed. A second signal means "now": the listeners step
 * aside and the signal is raised again, so the process ends the way the user asked (130).
 */
export function abortOnSignals(controller: AbortController, io: Io, message: string): () => void {
  // The commands that listen have loaded the library already: this resolves at once, and the
  // second signal's handler can stay synchronous.
  let killGroups: (() => void) | undefined;
  void core().then(
    (lib) => (killGroups = lib.killProcessGroups),
    () => undefined,
  );
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) {
      io.stderr.write('\nexiting at once; the run folder may miss its last records\n');
      stop();
      process.removeAllListeners(signal);
      // A death by signal runs no 'exit' listeners: the tools' process groups are killed first.
      killGroups?.();
      process.kill(process.pid, signal);
      return;
    }
    io.stderr.write(`\n${message}\n`);
    controller.abort(new Error('interrupted'));
  };
  const stop = (): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return stop;
}

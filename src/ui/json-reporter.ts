/** `--json`: every event as one JSON line on stdout, and nothing else there. */
import type { Output, RunSource } from './run-source.js';

export function attachJsonReporter(run: RunSource, out: Output): { close(): void } {
  let n = 0;
  const off = run.events.onAny((e) => {
    out.write(`${JSON.stringify({ event_seq: ++n, ...e })}\n`);
  });
  return { close: off };
}

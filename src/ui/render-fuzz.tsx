/** Mounts the live view of `agent fuzz` on a TTY and unmounts it when the fuzzer is done. */
import { render } from 'ink';
import { useEffect, useState } from 'react';
import type { FuzzEvent } from '../fuzz/fuzz.js';
import { FuzzPanel, type FuzzProgress } from './fuzz-view.js';

/** What the fuzz view follows: the fuzzer's events. */
export interface FuzzSource {
  readonly events: { onAny(l: (e: FuzzEvent) => void): () => void };
}

function LiveFuzz({ source, now }: { readonly source: FuzzSource; readonly now: () => number }) {
  const [p, setP] = useState<FuzzProgress>({ env: '', runs: 0, cases: 0, elapsedMs: 0, failures: {}, fixed: [] });
  useEffect(() => {
    const start = now();
    let cases = 0;
    const off = source.events.onAny((e) => {
      if (e.type === 'started') setP((s) => ({ ...s, env: e.env, runs: e.runs + e.saved }));
      else if (e.type === 'fixed') setP((s) => ({ ...s, fixed: [...s.fixed, e.signature] }));
      else if (e.type === 'case') {
        cases++;
        const f = e.failure;
        if (f) setP((s) => ({ ...s, failures: { ...s.failures, [`${f.check}:${e.case.action}:${f.code}`]: (s.failures[`${f.check}:${e.case.action}:${f.code}`] ?? 0) + 1 } }));
      }
    });
    const timer = setInterval(() => setP((s) => ({ ...s, cases, elapsedMs: now() - start })), 100);
    return () => {
      off();
      clearInterval(timer);
    };
  }, [source, now]);
  return <FuzzPanel p={p} />;
}

/** Renders the live view of `agent fuzz` on a terminal; `close()` leaves the final frame. */
export function renderFuzzView(source: FuzzSource, stdout: NodeJS.WriteStream): { close(): void } {
  const instance = render(<LiveFuzz source={source} now={() => performance.now()} />, { stdout, exitOnCtrlC: false, patchConsole: false });
  return { close: () => instance.unmount() };
}

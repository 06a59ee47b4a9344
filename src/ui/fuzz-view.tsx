/** The live view of `agent fuzz` on a TTY: cases, cases/s, failures so far. */
import { Box, render, Text } from 'ink';
import { useEffect, useState } from 'react';
import type { FuzzEvent } from '../eval/fuzz/fuzz.js';

export interface FuzzProgress {
  readonly env: string;
  readonly runs: number;
  readonly cases: number;
  readonly elapsedMs: number;
  /** signature → count */
  readonly failures: Readonly<Record<string, number>>;
  readonly fixed: readonly string[];
}

export function FuzzPanel({ p }: { readonly p: FuzzProgress }) {
  const rate = p.cases / Math.max(p.elapsedMs / 1000, 1e-3);
  const sigs = Object.entries(p.failures);
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>agent fuzz</Text> · {p.env} · {p.cases}/{p.runs} cases · {Math.round(rate).toLocaleString('en-US')} cases/s ·{' '}
        <Text color={sigs.length > 0 ? 'red' : 'green'}>{sigs.length} failure{sigs.length === 1 ? '' : 's'}</Text>
      </Text>
      {p.fixed.map((s) => (
        <Text key={s} color="green">
          ✓ fixed: {s}
        </Text>
      ))}
      {sigs.map(([s, n]) => (
        <Text key={s} color="red">
          ✗ {s} ×{n}
        </Text>
      ))}
    </Box>
  );
}

interface Source {
  readonly events: { onAny(l: (e: FuzzEvent) => void): () => void };
}

function LiveFuzz({ source, now }: { readonly source: Source; readonly now: () => number }) {
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

export function renderFuzzView(source: Source, stdout: NodeJS.WriteStream): { close(): void } {
  const instance = render(<LiveFuzz source={source} now={() => performance.now()} />, { stdout, exitOnCtrlC: false, patchConsole: false });
  return { close: () => instance.unmount() };
}

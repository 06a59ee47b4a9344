/** The live view of `agent fuzz` on a TTY: cases, cases/s, failures so far. */
import { Box, Text } from 'ink';

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


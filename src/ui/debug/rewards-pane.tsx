/** Rewards: per step and source, the value, where it stands, its arrival delay and deadline; late ones in red. */
import { Box, Text } from 'ink';
import { useMemo, useState } from 'react';
import type { RewardRow } from '../../replay/run-index.js';
import { formatDuration, formatNumber } from '../format.js';
import { matches, parseQuery } from '../../shared/query.js';
import { arrayRows } from './rows.js';
import { fit, pad, Tone, windowOf, type ToneColor } from './tone.js';
import type { IndexPaneProps } from './pane-props.js';
import { useListKeys } from './use-list-keys.js';

export interface RewardsPaneProps extends IndexPaneProps {
  readonly now: number;
}

/** A value as short as it can be said (three decimals at most). */
const num = (v: number | undefined): string => (v === undefined ? '' : Math.abs(v) >= 10_000 ? formatNumber(v) : String(Number(v.toFixed(3))));

const TONES: Readonly<Record<RewardRow['status'], ToneColor | undefined>> = { pending: 'yellow', arrived: 'green', fallback: 'yellow', late: 'red', failed: 'red' };

export function RewardsPane({ index, version, now, query, width, height, active }: RewardsPaneProps) {
  const rows = useMemo(() => {
    if (query.trim() === '') return arrayRows(index.rewards);
    const q = parseQuery(query);
    return arrayRows(index.rewards.filter((r) => matches(q, { source: r.source, status: r.status, ep: r.episode, episode: r.episode, trace: r.traceId }, `${r.traceId} ${r.source} ${r.status} ${r.reason ?? ''}`)));
    // The index mutates in place: `version` says when it changed.
  }, [index, version, query]);
  const bySource = index.rewardCounts;
  const [cursor, setCursor] = useState(0);
  const at = Math.min(cursor, Math.max(0, rows.length - 1));
  const list = Math.max(1, height - 2 - Math.min(bySource.size, 4));
  useListKeys(active, rows.length, at, list, setCursor);
  const { start, end } = windowOf(rows.length, at, list);
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>Rewards</Text> {index.rewards.length.toLocaleString('en-US')} values
        {query ? <Text dimColor> · /{fit(query, 30)} ({rows.length.toLocaleString('en-US')} match)</Text> : null}
      </Text>
      {[...bySource].slice(0, 4).map(([source, c]) => (
        <Text key={source} wrap="truncate">
          {'  '}
          {pad(source, 16)} <Tone c="green">{c.arrived} arrived</Tone> · <Tone c={c.pending ? 'yellow' : undefined}>{c.pending} pending</Tone> · {c.fallback} imputed ·{' '}
          <Tone c={c.late ? 'red' : undefined}>{c.late} late</Tone> · <Tone c={c.failed ? 'red' : undefined}>{c.failed} failed</Tone>
        </Text>
      ))}
      <Text dimColor>{fit(`  ${pad('trace', 12)} ${pad('step', 4)} ${pad('source', 12)} ${pad('status', 9)} ${pad('value', 16)} ${pad('delay', 7)} deadline`, width)}</Text>
      {rows.length === 0 ? <Text dimColor>  {query ? 'no reward matches the search' : 'no rewards yet'}</Text> : null}
      {rows.slice(start, end).map((r, i) => {
        const isSel = start + i === at;
        const deadline = r.deadlineAt === undefined ? '' : r.status === 'pending' ? `in ${formatDuration(Math.max(0, r.deadlineAt - now))}` : new Date(r.deadlineAt).toISOString().slice(11, 23);
        const value = r.status === 'late' ? `${num(r.lateValue)}${r.value !== undefined ? ` (kept ${num(r.value)})` : ''}` : num(r.value);
        return (
          <Text key={`${r.traceId} ${r.source}`} inverse={isSel && active} wrap="truncate">
            {isSel ? '▸ ' : '  '}
            {pad(r.traceId, 12)} {pad(String(r.step), 4)} {pad(r.source, 12)} <Tone c={TONES[r.status]}>{pad(r.status, 9)}</Tone> <Tone c={r.status === 'late' ? 'red' : undefined}>{pad(value, 16)}</Tone>{' '}
            {pad(r.delayMs !== undefined ? formatDuration(r.delayMs) : '', 7)} {deadline}
            {r.reason ? <Text dimColor> {r.reason}</Text> : null}
          </Text>
        );
      })}
    </Box>
  );
}

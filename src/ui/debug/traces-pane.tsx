/** Traces: every trace with its action, status, duration, attempts and error; pending ones first, oldest first, with their age. */
import { Box, Text, useInput } from 'ink';
import { useMemo, useState } from 'react';
import type { RunIndex, TraceRow } from '../../replay/run-index.js';
import { formatDuration } from '../format.js';
import { matches, parseQuery } from '../../shared/query.js';
import { arrayRows, mapThenArray, type Rows } from './rows.js';
import { fit, pad, Tone, windowOf } from './tone.js';
import type { IndexPaneProps } from './pane-props.js';
import { useListKeys } from './use-list-keys.js';

export interface TracesPaneProps extends IndexPaneProps {
  readonly now: number;
  /** Enter on a trace: open its episode's timeline. */
  readonly onOpen: (trace: TraceRow) => void;
}

/** Pending traces (oldest first), then the settled ones in the order they settled. */
function rowsOf(index: RunIndex<unknown>, query: string): Rows<TraceRow> {
  if (query.trim() === '') return mapThenArray(index.pending, index.settled);
  const q = parseQuery(query);
  const keep = (t: TraceRow): boolean =>
    matches(q, { tool: t.action, action: t.action, status: t.status, ep: t.episode, episode: t.episode, code: t.error?.code }, `${t.traceId} ${t.action} ${t.status} ${t.error?.code ?? ''} ${t.error?.message ?? ''}`);
  const rows: TraceRow[] = [];
  for (const t of index.pending.values()) if (keep(t)) rows.push(t);
  for (const t of index.settled) if (keep(t)) rows.push(t);
  return arrayRows(rows);
}

export function TracesPane({ index, version, now, query, width, height, active, onOpen }: TracesPaneProps) {
  // The index mutates in place: `version` says when it changed.
  const rows = useMemo(() => rowsOf(index, query), [index, version, query]);
  const [cursor, setCursor] = useState(0);
  const at = Math.min(cursor, Math.max(0, rows.length - 1));
  const list = height - 2;
  useListKeys(active, rows.length, at, list, setCursor);
  useInput(
    (_input, key) => {
      const row = rows.slice(at, at + 1)[0];
      if (key.return && row) onOpen(row);
    },
    { isActive: active },
  );
  const failed = index.failedTraces;
  const { start, end } = windowOf(rows.length, at, list);
  const cols = { id: 14, ep: 6, action: Math.max(10, Math.min(24, width - 66)), status: 9, dur: 8, att: 4 };
  const errWidth = Math.max(0, width - (cols.id + cols.ep + cols.action + cols.status + cols.dur + cols.att + 8));
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>Traces</Text> {index.traces.length.toLocaleString('en-US')} · <Tone c={index.pending.size > 0 ? 'yellow' : undefined}>{index.pending.size.toLocaleString('en-US')} pending</Tone> ·{' '}
        <Tone c={failed > 0 ? 'red' : undefined}>{failed.toLocaleString('en-US')} failed</Tone>
        {query ? <Text dimColor> · /{fit(query, 30)} ({rows.length.toLocaleString('en-US')} match)</Text> : null}
      </Text>
      <Text dimColor>{fit(`  ${pad('trace', cols.id)} ${pad('ep', cols.ep)} ${pad('action', cols.action)} ${pad('status', cols.status)} ${pad('time', cols.dur)} ${pad('try', cols.att)} error`, width)}</Text>
      {rows.length === 0 ? <Text dimColor>  {query ? 'no trace matches the search' : 'no traces yet'}</Text> : null}
      {rows.slice(start, end).map((t, i) => {
        const age = t.status === 'pending' ? now - t.dispatchedAt : undefined;
        const time = age !== undefined ? formatDuration(Math.max(0, age)) : t.durationMs !== undefined ? formatDuration(t.durationMs) : '';
        const selected = start + i === at;
        return (
          <Text key={t.traceId} inverse={selected && active} wrap="truncate">
            {selected ? '▸ ' : '  '}
            {pad(t.traceId, cols.id)} {pad(String(t.episode), cols.ep)} {pad(t.action, cols.action)}{' '}
            <Tone c={t.status === 'failed' ? 'red' : t.status === 'pending' ? 'yellow' : 'green'}>{pad(t.status, cols.status)}</Tone>{' '}
            <Tone c={age !== undefined && age > 5_000 ? 'red' : age !== undefined && age > 1_000 ? 'yellow' : undefined}>{pad(time, cols.dur)}</Tone> {pad(t.attempts !== undefined ? String(t.attempts) : '', cols.att)}{' '}
            <Tone c="red">{fit(t.error ? `${t.error.code}: ${t.error.message.split('\n')[0] ?? ''}` : '', errWidth)}</Tone>
          </Text>
        );
      })}
    </Box>
  );
}

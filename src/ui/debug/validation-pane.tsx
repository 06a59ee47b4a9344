/** Validation: every schema violation of the run (params, tool results, patches, rewards) with its JSON pointer and the offending value. */
import { Box, Text } from 'ink';
import { useMemo, useState } from 'react';
import { matches, parseQuery } from '../../shared/query.js';
import { fit, pad, Tone, windowOf } from './tone.js';
import type { IndexPaneProps } from './pane-props.js';
import { useListKeys } from './use-list-keys.js';

export type ValidationPaneProps = IndexPaneProps;

export function ValidationPane({ index, version, query, width, height, active }: ValidationPaneProps) {
  const rows = useMemo(() => {
    const q = parseQuery(query);
    return index.violations.filter((v) => matches(q, { kind: v.kind, code: v.code, ep: v.episode, episode: v.episode, tool: v.action, action: v.action }, `${v.traceId ?? ''} ${v.action ?? ''} ${v.pointer} ${v.message}`));
    // The index mutates in place: `version` says when it changed.
  }, [index, version, query]);
  const [cursor, setCursor] = useState(0);
  const at = Math.min(cursor, Math.max(0, rows.length - 1));
  const list = Math.max(1, height - 6);
  useListKeys(active, rows.length, at, list, setCursor);
  const { start, end } = windowOf(rows.length, at, list);
  const sel = rows[at];
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>Validation</Text> <Tone c={index.violations.length > 0 ? 'red' : 'green'}>{index.violations.length.toLocaleString('en-US')} violations</Tone>
        {query ? <Text dimColor> · /{fit(query, 30)} ({rows.length} match)</Text> : null}
      </Text>
      <Text dimColor>{fit(`  ${pad('kind', 7)} ${pad('trace', 14)} ${pad('action', 16)} ${pad('pointer', 18)} message`, width)}</Text>
      {rows.length === 0 ? <Text dimColor>  {query ? 'no violation matches the search' : 'none: every param, tool result, patch and reward matched its schema'}</Text> : null}
      {rows.slice(start, end).map((v, i) => {
        const isSel = start + i === at;
        return (
          <Text key={start + i} inverse={isSel && active} wrap="truncate">
            {isSel ? '▸ ' : '  '}
            {pad(v.kind, 7)} {pad(v.traceId ?? (v.episode !== undefined ? `episode ${v.episode}` : ''), 14)} {pad(v.action ?? '', 16)} <Tone c="red" bold>{pad(v.pointer || '(root)', 18)}</Tone> {v.message}
          </Text>
        );
      })}
      {sel ? (
        <>
          <Text dimColor>{fit(`─ ${sel.code} in ${sel.kind}${sel.traceId ? ` of ${sel.traceId}` : ''} at ${new Date(sel.time).toISOString()}`, width)}</Text>
          <Text wrap="truncate">
            {'  '}
            <Tone c="red" bold>{sel.pointer || '(root)'}</Tone>: {sel.message}
          </Text>
          <Text wrap="truncate">  value: {sel.value === undefined ? <Text dimColor>(not recorded)</Text> : <Tone c="red">{fit(JSON.stringify(sel.value), Math.max(0, width - 10))}</Tone>}</Text>
        </>
      ) : null}
    </Box>
  );
}

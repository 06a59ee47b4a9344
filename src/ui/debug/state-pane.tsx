/**
 * State of one episode at any seq: a tree (Enter expands or collapses), ←/→ through the commits
 * with the commit's patch shown as a diff, and `f` for every change to the field under the cursor.
 */
import { Box, Text, useInput } from 'ink';
import { useMemo, useState } from 'react';
import type { DebugFeed, EpisodeHistory } from '../../replay/debug-feed.js';
import { escapePointerToken, valueAtPointer, type JsonValue } from '../../shared/json.js';
import { fit, Tone, windowOf } from './tone.js';
import { useEpisodeData } from './use-episode.js';
import type { PaneArea } from './pane-props.js';
import { useListKeys } from './use-list-keys.js';

export interface StatePaneProps extends PaneArea {
  readonly feed: DebugFeed;
  readonly episode: number | undefined;
  /** The seq to show; undefined: the episode's latest. */
  readonly seq: number | undefined;
  readonly onSeq: (seq: number) => void;
}

interface TreeRow {
  readonly pointer: string;
  readonly depth: number;
  readonly label: string;
  readonly value: JsonValue;
  readonly container: boolean;
}

function preview(v: JsonValue): string {
  if (Array.isArray(v)) return `[${v.length}]`;
  if (v !== null && typeof v === 'object') return `{${Object.keys(v).length}}`;
  return JSON.stringify(v);
}

/** The visible rows of the tree: containers list their children only when expanded. */
export function flattenTree(state: JsonValue, expanded: ReadonlySet<string>): TreeRow[] {
  const rows: TreeRow[] = [];
  const walk = (v: JsonValue, pointer: string, depth: number, label: string): void => {
    const container = v !== null && typeof v === 'object';
    rows.push({ pointer, depth, label, value: v, container });
    if (!container || !expanded.has(pointer)) return;
    const entries: [string, JsonValue][] = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v);
    for (const [k, child] of entries) walk(child, `${pointer}/${escapePointerToken(k)}`, depth + 1, k);
  };
  walk(state, '', 0, '(root)');
  return rows;
}

/** A patch as diff lines: `+` added, `-` removed, `~` replaced (old → new). */
function diffLines(h: EpisodeHistory, seq: number): { sign: '+' | '-' | '~'; text: string }[] {
  const i = h.commits.findIndex((c) => c.seq === seq);
  const commit = h.commits[i];
  if (!commit) return [];
  const before = h.states[i] as JsonValue;
  return commit.patch.map((op) => {
    const v = 'value' in op ? JSON.stringify(op.value) : '';
    if (op.op === 'remove') return { sign: '-', text: `${op.path}  (was ${JSON.stringify(valueAtPointer(before, op.path))})` };
    if (op.op === 'add' && valueAtPointer(before, op.path) === undefined) return { sign: '+', text: `${op.path}: ${v}` };
    if (op.op === 'replace' || op.op === 'add') return { sign: '~', text: `${op.path}: ${JSON.stringify(valueAtPointer(before, op.path))} → ${v}` };
    return { sign: '~', text: `${op.op} ${'from' in op ? `${op.from} → ` : ''}${op.path}${v ? `: ${v}` : ''}` };
  });
}

const load = (feed: DebugFeed, episode: number, signal: AbortSignal) => feed.episodeHistory(episode, signal);

export function StatePane({ feed, episode, seq, onSeq, width, height, active }: StatePaneProps) {
  const loaded = useEpisodeData(feed, episode, load);
  const h = loaded.value;
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(() => new Set(['']));
  const [cursor, setCursor] = useState(0);
  const [fieldMode, setFieldMode] = useState(false);
  const last = h ? (h.commits[h.commits.length - 1]?.seq ?? 0) : 0;
  const shown = Math.min(seq ?? last, last);
  // seq → position in states: commits can start after 0 (a resumed episode) or skip numbers.
  const position = h ? h.commits.filter((c) => c.seq <= shown).length : 0;
  const state = h ? (h.states[position] as JsonValue) : null;
  const rows = useMemo(() => flattenTree(state, expanded), [state, expanded]);
  const at = Math.min(cursor, Math.max(0, rows.length - 1));
  const diff = useMemo(() => (h ? diffLines(h, shown) : []), [h, shown]);
  const row = rows[at];
  const history = useMemo(() => {
    if (!h || !row || !fieldMode) return [];
    const out: { seq: number; traceId?: string | undefined; value: JsonValue | undefined }[] = [{ seq: 0, value: valueAtPointer(h.initial, row.pointer) }];
    h.commits.forEach((c, i) => {
      const v = valueAtPointer(h.states[i + 1] as JsonValue, row.pointer);
      if (JSON.stringify(v) !== JSON.stringify(out[out.length - 1]?.value)) out.push({ seq: c.seq, traceId: c.traceId, value: v });
    });
    return out;
  }, [h, row, fieldMode]);
  const lower = fieldMode ? Math.min(history.length + 1, Math.floor(height / 2)) : Math.min(diff.length + 1, Math.max(2, Math.floor(height / 3)));
  const treeRows = Math.max(3, height - 2 - lower);
  useListKeys(active, rows.length, at, treeRows, setCursor);
  useInput(
    (input, key) => {
      if (!h) return;
      const seqs = [0, ...h.commits.map((c) => c.seq)];
      const i = seqs.indexOf(shown);
      if (key.leftArrow) onSeq(seqs[Math.max(0, i - 1)] as number);
      else if (key.rightArrow) onSeq(seqs[Math.min(seqs.length - 1, i + 1)] as number);
      else if ((key.return || input === ' ') && row?.container) {
        const next = new Set(expanded);
        if (next.has(row.pointer)) next.delete(row.pointer);
        else next.add(row.pointer);
        setExpanded(next);
      } else if (input === 'f') setFieldMode((f) => !f);
    },
    { isActive: active },
  );
  if (episode === undefined) return <Text dimColor>No episode yet: pick a trace in Traces (Enter), or wait for the run to start one.</Text>;
  if (loaded.error) return <Text color="red">{loaded.error}</Text>;
  if (!h) return <Text dimColor>loading episode {episode}…</Text>;
  const commit = h.commits.find((c) => c.seq === shown);
  const changed = commit ? commit.patch.map((op) => op.path) : [];
  const { start, end } = windowOf(rows.length, at, treeRows);
  return (
    <Box flexDirection="column">
      <Text wrap="truncate">
        <Text bold>State</Text> episode {episode} · seq {shown}/{last}
        {commit ? ` · ${commit.traceId ?? ''} at ${new Date(commit.time).toISOString().slice(11, 23)}` : ' · initial'} <Text dimColor>←/→ seq · Enter expand · f field history</Text>
      </Text>
      {rows.slice(start, end).map((r, i) => {
        const isSel = start + i === at;
        const touched = changed.some((p) => p === r.pointer || (r.container && p.startsWith(`${r.pointer}/`)));
        const marker = r.container ? (expanded.has(r.pointer) ? '▾' : '▸') : ' ';
        return (
          <Text key={r.pointer} inverse={isSel && active} wrap="truncate">
            {'  '.repeat(r.depth)}
            {marker} {r.label}: <Tone c={touched ? 'yellow' : undefined}>{fit(preview(r.value), Math.max(0, width - r.depth * 2 - r.label.length - 6))}</Tone>
            {touched ? <Tone c="yellow"> *</Tone> : null}
          </Text>
        );
      })}
      {fieldMode ? (
        <>
          <Text dimColor>{fit(`─ changes to ${row?.pointer || '(root)'}: ${Math.max(0, history.length - 1)}`, width)}</Text>
          {history.slice(-(lower - 1)).map((c) => (
            <Text key={c.seq} wrap="truncate">
              {'  seq '}
              {String(c.seq).padStart(4)} {(c.traceId ?? '').padEnd(12)} {c.value === undefined ? '(absent)' : fit(JSON.stringify(c.value), Math.max(0, width - 26))}
            </Text>
          ))}
        </>
      ) : (
        <>
          <Text dimColor>{fit(commit ? `─ patch of seq ${shown}` : '─ the initial state (no patch)', width)}</Text>
          {diff.slice(0, lower - 1).map((d, i) => (
            <Text key={i} wrap="truncate">
              <Tone c={d.sign === '+' ? 'green' : d.sign === '-' ? 'red' : 'yellow'}>
                {'  '}
                {d.sign} {fit(d.text, Math.max(0, width - 6))}
              </Tone>
            </Text>
          ))}
        </>
      )}
    </Box>
  );
}

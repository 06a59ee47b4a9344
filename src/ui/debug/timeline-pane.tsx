/**
 * Timeline of one episode: each trace as a bar from dispatch to settle on the episode's time axis,
 * with its commit (●) and reward arrivals (◆, late ones in red), and below, the selected trace's
 * events with their offsets.
 */
import { Box, Text, useInput } from 'ink';
import { useMemo, useState } from 'react';
import type { DebugFeed } from '../../replay/debug-feed.js';
import type { IndexedEvent } from '../../replay/run-index.js';
import type { TokenTurn } from '../../events/env-events.js';
import { formatDuration } from '../format.js';
import { fit, pad, Tone, windowOf, type ToneColor } from './tone.js';
import { useEpisodeData } from './use-episode.js';
import type { PaneArea } from './pane-props.js';
import { useListKeys } from './use-list-keys.js';
import { returnText, type EpisodeReturn } from '../episode-returns.js';

export interface TimelinePaneProps extends PaneArea {
  readonly feed: DebugFeed;
  readonly episode: number | undefined;
  /** Enter on a trace: the state after it. */
  readonly onState: (episode: number, seq: number) => void;
}

interface Lane {
  readonly traceId: string;
  readonly action: string;
  readonly start: number;
  end?: number;
  status: string;
  seq?: number;
  step?: number;
  commitAt?: number;
  readonly rewards: { at: number; late: boolean }[];
  readonly events: IndexedEvent[];
}

function lanesOf(events: readonly IndexedEvent[]): Lane[] {
  const lanes = new Map<string, Lane>();
  for (const e of events) {
    const id = e['trace_id'];
    if (typeof id !== 'string') continue;
    let lane = lanes.get(id);
    if (!lane) {
      if (e.type !== 'dispatched') continue;
      lane = { traceId: id, action: String(e['action']), start: e.time, status: 'pending', rewards: [], events: [] };
      lanes.set(id, lane);
    }
    lane.events.push(e);
    if (e.type === 'state_committed') {
      lane.commitAt = e.time;
      lane.seq = e['seq'] as number;
    } else if (e.type === 'trace_settled') {
      lane.end = e.time;
      lane.status = String(e['status']);
      lane.seq ??= e['seq'] as number;
      lane.step = e['step'] as number;
    } else if (e.type === 'reward_arrived' || e.type === 'reward_late') lane.rewards.push({ at: e.time, late: e.type === 'reward_late' });
  }
  return [...lanes.values()];
}

const load = (feed: DebugFeed, episode: number, signal: AbortSignal) => feed.episodeEvents(episode, signal);

export function TimelinePane({ feed, episode, width, height, active, onState }: TimelinePaneProps) {
  const loaded = useEpisodeData(feed, episode, load);
  const events = loaded.value;
  const lanes = useMemo(() => (events ? lanesOf(events) : []), [events]);
  const [cursor, setCursor] = useState(0);
  const at = Math.min(cursor, Math.max(0, lanes.length - 1));
  const laneRows = Math.max(3, Math.floor((height - 3) * 0.55));
  useListKeys(active, lanes.length, at, laneRows, setCursor);
  useInput(
    (_input, key) => {
      const lane = lanes[at];
      if (key.return && lane && episode !== undefined) onState(episode, lane.seq ?? 0);
    },
    { isActive: active },
  );
  if (episode === undefined) return <Text dimColor>No episode yet: pick a trace in Traces (Enter), or wait for the run to start one.</Text>;
  const row = feed.index.episodes.get(episode);
  if (loaded.error) return <Text color="red">{loaded.error}</Text>;
  if (!events || !row) return <Text dimColor>loading episode {episode}…</Text>;
  const t0 = row.startedAt;
  const t1 = Math.max(row.finishedAt ?? 0, ...events.map((e) => e.time), t0 + 1);
  const label = 14 + 1 + 14;
  const axis = Math.max(10, width - label - 14);
  const x = (t: number): number => Math.min(axis - 1, Math.max(0, Math.round(((t - t0) / (t1 - t0)) * (axis - 1))));
  const { start, end } = windowOf(lanes.length, at, laneRows);
  const selected = lanes[at];
  const turn = selected?.step !== undefined ? turnOf(events, selected.step) : undefined;
  const detailRows = Math.max(1, height - 3 - (end - start) - 1 - (turn ? 3 : 0));
  return (
    <Box flexDirection="column">
      <Text wrap="truncate">
        <Text bold>Timeline</Text> episode {episode} ({row.instanceId}) · {lanes.length} traces · {formatDuration(t1 - t0)}
        {row.reason ? ` · ${row.reason}, reward ${episodeReward(feed.index.episodeReturn(episode), row.reward)}` : ' · running'} <Text dimColor>[ ] episode · Enter: state</Text>
      </Text>
      <Text dimColor>{fit(`  ${pad('trace', 14)} ${pad('action', 14)}0${' '.repeat(Math.max(0, axis - 2 - formatDuration(t1 - t0).length))}${formatDuration(t1 - t0)}`, width)}</Text>
      {lanes.slice(start, end).map((lane, i) => {
        const barTone: ToneColor = lane.status === 'failed' ? 'red' : lane.status === 'pending' ? 'yellow' : 'cyan';
        const cells: { ch: string; tone: ToneColor | undefined }[] = Array.from({ length: axis }, () => ({ ch: '·', tone: undefined }));
        for (let c = x(lane.start); c <= x(lane.end ?? t1); c++) cells[c] = { ch: '━', tone: barTone };
        if (lane.commitAt !== undefined) cells[x(lane.commitAt)] = { ch: '●', tone: barTone };
        for (const r of lane.rewards) cells[x(r.at)] = { ch: '◆', tone: r.late ? 'red' : 'magenta' };
        const isSel = start + i === at;
        return (
          <Text key={lane.traceId} inverse={isSel && active} wrap="truncate">
            {isSel ? '▸ ' : '  '}
            {pad(lane.traceId, 14)} {pad(lane.action, 14)}
            {segments(cells).map((seg, k) => (
              <Tone key={k} c={seg.tone}>
                {seg.text}
              </Tone>
            ))}{' '}
            {lane.end !== undefined ? formatDuration(lane.end - lane.start) : 'pending'}
            {lane.rewards.some((r) => r.late) ? <Tone c="red"> late</Tone> : null}
          </Text>
        );
      })}
      <Text dimColor>{fit(`─ ${selected ? `${selected.traceId} ${selected.action} (${selected.status})` : ''} `, width)}</Text>
      {(selected?.events ?? []).slice(0, detailRows).map((e, i) => (
        <Text key={i} wrap="truncate">
          {'  +'}
          {pad(formatDuration(e.time - (selected?.start ?? t0)), 7)} <Tone c={e.type === 'reward_late' || (e.type === 'trace_settled' && e['status'] === 'failed') ? 'red' : undefined}>{pad(e.type, 16)}</Tone> <Text dimColor>{fit(eventDetail(e), Math.max(0, width - 30))}</Text>
        </Text>
      ))}
      {turn ? <TurnLines turn={turn} width={width} /> : null}
    </Box>
  );
}

/** The token-mode turn that chose a step: the last one at or before it (a turn's later calls are later steps). */
function turnOf(events: readonly IndexedEvent[], step: number): TokenTurn | undefined {
  let found: TokenTurn | undefined;
  for (const e of events) if (e.type === 'llm_call' && e['role'] === 'policy' && e['tokens'] !== undefined && (e['step'] as number) <= step) found = e['tokens'] as unknown as TokenTurn;
  return found;
}

/** A turn's tokens in three lines: what it was, the generated ids with their text (mask 1), the environment's last ids before it (mask 0). */
function TurnLines({ turn, width }: { readonly turn: TokenTurn; readonly width: number }) {
  const generated = turn.token_ids.map((id, i) => `${JSON.stringify(turn.token_strs?.[i] ?? '').slice(1, -1)}·${id}`).join(' ');
  const env = turn.env_ids.slice(-40).join(' ');
  return (
    <>
      <Text wrap="truncate">
        {'  '}model turn: prompt {turn.prompt_length} · +{turn.env_ids.length} from the env (mask 0) · {turn.token_ids.length} generated (mask 1) · {turn.finish_reason}
        {turn.invalid !== undefined ? <Tone c="red"> · invalid: {turn.invalid}</Tone> : null}
        {turn.drift ? <Tone c="red"> · drift at {turn.drift.at}</Tone> : null}
      </Text>
      <Text wrap="truncate">
        {'  '}
        <Tone c="cyan">{fit(generated, Math.max(0, width - 4))}</Tone>
      </Text>
      <Text dimColor wrap="truncate">
        {'  '}env …{fit(env, Math.max(0, width - 8))}
      </Text>
    </>
  );
}

/** Runs of cells of one tone, drawn as one Text each. */
function segments(cells: readonly { ch: string; tone: ToneColor | undefined }[]): { text: string; tone: ToneColor | undefined }[] {
  const out: { text: string; tone: ToneColor | undefined }[] = [];
  for (const c of cells) {
    const last = out[out.length - 1];
    if (last && last.tone === c.tone) last.text += c.ch;
    else out.push({ text: c.ch, tone: c.tone });
  }
  return out;
}

function eventDetail(e: IndexedEvent): string {
  switch (e.type) {
    case 'dispatched':
      return JSON.stringify(e['params'] ?? {});
    case 'tool_finished':
      return `${e['ok'] ? 'ok' : 'failed'} in ${formatDuration(e['duration_ms'] as number)}, ${String(e['attempts'])} attempt(s)`;
    case 'state_committed':
      return `seq ${String(e['seq'])}: ${JSON.stringify(e['patch'])}`;
    case 'trace_settled':
      return `${String(e['status'])}, step ${String(e['step'])}, reward ${String(e['reward'])}`;
    case 'reward_arrived':
    case 'reward_late':
    case 'reward_imputed':
      return `${String(e['source'])} = ${String(e['value'])}`;
    case 'error': {
      const err = e['error'] as { code?: string; message?: string } | undefined;
      return `${err?.code ?? ''}: ${err?.message?.split('\n')[0] ?? ''}`;
    }
    default:
      return '';
  }
}

/** The episode's return as the export counts it, delayed values that landed included, with what is still pending said; an older index has only its value at its end. */
function episodeReward(r: EpisodeReturn | undefined, atEnd: number | undefined): string {
  return r ? returnText(r, String) : String(atEnd ?? '');
}

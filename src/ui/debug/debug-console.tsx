/**
 * `agent debug`: a console for watching and rewinding a run, from its folder or live. Five panes
 * (Traces, Timeline, State, Rewards, Validation) switched with 1–5 or Tab and listed in the
 * footer; `?` help, `/` search, `q` quit. Sized to the terminal: an 80×24 screen shows every
 * pane with nothing scrolling off, because each pane draws exactly the rows it is given.
 */
import { Box, Text, useApp, useInput, useStdout } from 'ink';
import { useCallback, useState } from 'react';
import type { DebugFeed, FeedStatus } from '../../replay/debug-feed.js';
import type { TraceRow } from '../../replay/run-index.js';
import { ColorContext, fit, Tone } from './tone.js';
import { RewardsPane } from './rewards-pane.js';
import { StatePane } from './state-pane.js';
import { TimelinePane } from './timeline-pane.js';
import { TracesPane } from './traces-pane.js';
import { stepEpisode } from './use-episode.js';
import { useFeed } from './use-feed.js';
import { ValidationPane } from './validation-pane.js';

export const PANES = ['Traces', 'Timeline', 'State', 'Rewards', 'Validation'] as const;
export type PaneName = (typeof PANES)[number];

const HELP: readonly (readonly [string, string])[] = [
  ['1–5, Tab', 'switch pane (Shift-Tab back)'],
  ['↑/↓ j/k, PgUp/PgDn, g/G', 'move in a list'],
  ['Enter', 'Traces: open the episode · Timeline: state after the trace · State: expand'],
  ['[ / ]', 'previous / next episode (Timeline, State)'],
  ['←/→', 'State: previous / next seq, the patch shown as a diff'],
  ['f', 'State: every change to the field under the cursor'],
  ['/', 'search: words, or tool:x status:failed ep:3 source:x kind:params'],
  ['Esc', 'clear the search, close help'],
  ['q, Ctrl-C', 'quit'],
];

export interface DebugConsoleProps {
  readonly feed: DebugFeed;
  /** Whether to use colour (off with NO_COLOR). */
  readonly color?: boolean;
  /** Redraw interval (default 80 ms: 12.5 fps). */
  readonly frameMs?: number;
  readonly initialPane?: PaneName;
  /** The screen size (default: the terminal's, else 80×24). */
  readonly size?: { readonly columns: number; readonly rows: number };
}

function phaseText(s: FeedStatus): { text: string; tone: 'green' | 'yellow' | 'red' | undefined } {
  switch (s.phase) {
    case 'indexing':
      return { text: `indexing ${Math.round((s.progress ?? 0) * 100)}%`, tone: 'yellow' };
    case 'following':
      return { text: 'following the folder', tone: 'green' };
    case 'live':
      return { text: 'live', tone: 'green' };
    case 'reconnecting':
      return { text: `reconnecting${s.error ? ` (${s.error})` : ''}`, tone: 'red' };
    default:
      return { text: s.error ? `stopped: ${s.error}` : 'finished', tone: s.error ? 'red' : undefined };
  }
}

export function DebugConsole({ feed, color = true, frameMs = 80, initialPane = 'Traces', size }: DebugConsoleProps) {
  const { exit } = useApp();
  const { stdout } = useStdout();
  const width = Math.max(40, size?.columns ?? (stdout.columns || 80));
  const height = Math.max(12, size?.rows ?? (stdout.rows || 24));
  const { version, status, now } = useFeed(feed, frameMs);
  const index = feed.index;
  const [pane, setPane] = useState<PaneName>(initialPane);
  const [queries, setQueries] = useState<Readonly<Record<string, string>>>({});
  const [draft, setDraft] = useState<string | undefined>(undefined);
  const [help, setHelp] = useState(false);
  const [chosenEpisode, setEpisode] = useState<number | undefined>(undefined);
  const [seq, setSeq] = useState<number | undefined>(undefined);
  const episode = chosenEpisode ?? stepEpisode(index.episodes.keys(), undefined, 0);

  useInput((input, key) => {
    if (draft !== undefined) {
      if (key.return) {
        setQueries((q) => ({ ...q, [pane]: draft }));
        setDraft(undefined);
      } else if (key.escape) setDraft(undefined);
      else if (key.backspace || key.delete) setDraft(draft.slice(0, -1));
      else if (input && !key.ctrl && !key.meta) setDraft(draft + input);
      return;
    }
    if (help) {
      if (key.escape || input === '?' || input === 'q') setHelp(false);
      return;
    }
    if (input === 'q' || (key.ctrl && input === 'c')) exit();
    else if (input === '?') setHelp(true);
    else if (input === '/') setDraft(queries[pane] ?? '');
    else if (key.escape) setQueries((q) => ({ ...q, [pane]: '' }));
    else if (/^[1-5]$/.test(input)) setPane(PANES[Number(input) - 1] as PaneName);
    else if (key.tab) setPane(PANES[(PANES.indexOf(pane) + (key.shift ? PANES.length - 1 : 1)) % PANES.length] as PaneName);
    else if (input === '[' || input === ']') {
      setEpisode(stepEpisode(index.episodes.keys(), episode, input === '[' ? -1 : 1));
      setSeq(undefined);
    }
  });

  const openTrace = useCallback((t: TraceRow) => {
    setEpisode(t.episode);
    setSeq(undefined);
    setPane('Timeline');
  }, []);
  const openState = useCallback((ep: number, s: number) => {
    setEpisode(ep);
    setSeq(s);
    setPane('State');
  }, []);

  const run = index.run;
  const phase = phaseText(status);
  const body = height - 3;
  const active = draft === undefined && !help;
  const paneProps = { width, height: body, active };
  return (
    <ColorContext.Provider value={color}>
      <Box flexDirection="column" height={height} width={width}>
        <Text wrap="truncate">
          <Text bold>agent debug</Text> · {run ? `${run.runId} · ${run.env} · ${run.policy}` : feed.title} · <Tone c={phase.tone}>{phase.text}</Tone> · {index.events.toLocaleString('en-US')} events · {index.episodes.size.toLocaleString('en-US')}
          {run?.episodes ? `/${run.episodes.toLocaleString('en-US')}` : ''} episodes
        </Text>
        <Box flexDirection="column" height={body} overflow="hidden">
          {help ? (
            <Box flexDirection="column">
              <Text bold>Keys</Text>
              {HELP.map(([k, what]) => (
                <Text key={k} wrap="truncate">
                  {'  '}
                  <Tone c="cyan">{k.padEnd(24)}</Tone> {what}
                </Text>
              ))}
              <Text dimColor>  Esc or ? to close</Text>
            </Box>
          ) : pane === 'Traces' ? (
            <TracesPane index={index} version={version} now={status.phase === 'live' || status.phase === 'following' ? now : index.lastTime} query={queries['Traces'] ?? ''} onOpen={openTrace} {...paneProps} />
          ) : pane === 'Timeline' ? (
            <TimelinePane feed={feed} episode={episode} onState={openState} {...paneProps} />
          ) : pane === 'State' ? (
            <StatePane feed={feed} episode={episode} seq={seq} onSeq={setSeq} {...paneProps} />
          ) : pane === 'Rewards' ? (
            <RewardsPane index={index} version={version} now={status.phase === 'live' || status.phase === 'following' ? now : index.lastTime} query={queries['Rewards'] ?? ''} {...paneProps} />
          ) : (
            <ValidationPane index={index} version={version} query={queries['Validation'] ?? ''} {...paneProps} />
          )}
        </Box>
        <Text wrap="truncate">{draft !== undefined ? <Text>/{draft}▏<Text dimColor> Enter to search, Esc to cancel</Text></Text> : <Text dimColor>{fit(queries[pane] ? `search: ${queries[pane]} (Esc clears)` : '', width)}</Text>}</Text>
        <Text wrap="truncate">
          {PANES.map((p, i) => (
            <Text key={p}>
              {p === pane ? <Text inverse bold>{` ${i + 1} ${p} `}</Text> : <Text>{` ${i + 1} ${p} `}</Text>}
            </Text>
          ))}
          <Text dimColor> ? help / search q quit</Text>
        </Text>
      </Box>
    </ColorContext.Provider>
  );
}

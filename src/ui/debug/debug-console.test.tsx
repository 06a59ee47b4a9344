/** The debug console, pane by pane: keys pressed, frames asserted, at 80×24 with and without colour. */
import { render } from 'ink-testing-library';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { commitsOf, historyOf, type DebugFeed, type FeedStatus } from '../../replay/debug-feed.js';
import { RunIndex, type IndexedEvent } from '../../replay/run-index.js';
import type { JsonValue } from '../../shared/json.js';
import { DebugConsole, type PaneName } from './debug-console.js';

// Colour on in this file (chalk reads it when first loaded), so that NO_COLOR has something to turn off.
vi.hoisted(() => {
  process.env['FORCE_COLOR'] = '1';
});

const T0 = Date.UTC(2026, 10, 30, 10, 0, 0);
const INITIAL: JsonValue = { city: 'paris', temperature: 10, history: [] };

/** A feed over events given by hand, as a live run would stream them. */
class MemoryFeed implements DebugFeed {
  readonly title = 'memory';
  readonly index = new RunIndex<IndexedEvent>();
  readonly #listeners = new Set<() => void>();
  phase: FeedStatus['phase'] = 'finished';
  push(...events: IndexedEvent[]): void {
    for (const e of events) this.index.ingest(e, e);
    for (const l of this.#listeners) l();
  }
  status(): FeedStatus {
    return { phase: this.phase };
  }
  onChange(l: () => void): () => void {
    this.#listeners.add(l);
    return () => this.#listeners.delete(l);
  }
  episodeEvents(episode: number): Promise<readonly IndexedEvent[]> {
    return Promise.resolve(this.index.episodes.get(episode)?.refs ?? []);
  }
  episodeHistory(episode: number): Promise<ReturnType<typeof historyOf>> {
    const row = this.index.episodes.get(episode);
    return Promise.resolve(historyOf(episode, row?.instanceId ?? '', INITIAL, commitsOf(row?.refs ?? [])));
  }
  [Symbol.asyncDispose](): Promise<void> {
    return Promise.resolve();
  }
}

/** One episode: two resolved steps (the second with a late judge), one failed on its params, one pending. */
function recordedRun(): MemoryFeed {
  const feed = new MemoryFeed();
  const base = { instance_id: 'ep-0', episode: 0 };
  feed.push(
    { type: 'run_started', time: T0, run_id: 'run-1', dir: '/tmp/run-1', config: { env: 'weather', policy: 'random', episodes: 1, concurrency: 1, maxSteps: 5, seed: 0 } },
    { type: 'episode_started', time: T0, ...base, initial_state_id: 'initial-0' },
    { type: 'dispatched', time: T0 + 10, ...base, trace_id: 'ep-0:1', action: 'get_weather', params: { city: 'paris' } },
    { type: 'tool_started', time: T0 + 11, instance_id: 'ep-0', trace_id: 'ep-0:1', tool: 'get_weather' },
    { type: 'tool_finished', time: T0 + 60, instance_id: 'ep-0', trace_id: 'ep-0:1', tool: 'get_weather', ok: true, duration_ms: 49, attempts: 1 },
    { type: 'state_committed', time: T0 + 61, instance_id: 'ep-0', trace_id: 'ep-0:1', seq: 1, patch: [{ op: 'replace', path: '/temperature', value: 12 }] },
    { type: 'reward_arrived', time: T0 + 61, ...base, trace_id: 'ep-0:1', step: 1, source: 'api_latency', value: 49, key: 'tool', delay_ms: 0, reward: 49 },
    { type: 'trace_settled', time: T0 + 62, ...base, trace_id: 'ep-0:1', step: 1, action: 'get_weather', seq_before: 0, status: 'resolved', reward: 49, done: false, seq: 1, duration_ms: 52, params: { city: 'paris' }, rewards: { api_latency: { status: 'arrived', value: 49, arrived_at: T0 + 61, delay_ms: 0 }, llm_score: { status: 'pending', value: null, arrived_at: null, delay_ms: null, deadline_at: T0 + 500 } } },
    { type: 'dispatched', time: T0 + 100, ...base, trace_id: 'ep-0:2', action: 'get_weather', params: { city: 'rome' } },
    { type: 'state_committed', time: T0 + 150, instance_id: 'ep-0', trace_id: 'ep-0:2', seq: 2, patch: [{ op: 'add', path: '/history/-', value: 'rome' }, { op: 'replace', path: '/city', value: 'rome' }] },
    { type: 'trace_settled', time: T0 + 151, ...base, trace_id: 'ep-0:2', step: 2, action: 'get_weather', seq_before: 1, status: 'resolved', reward: 0, done: false, seq: 2, duration_ms: 51, params: { city: 'rome' }, rewards: {} },
    { type: 'reward_imputed', time: T0 + 500, ...base, trace_id: 'ep-0:1', step: 1, source: 'llm_score', value: 0.5, strategy: 'value', reason: 'deadline passed', reward: 49.5 },
    { type: 'reward_late', time: T0 + 900, ...base, trace_id: 'ep-0:1', step: 1, source: 'llm_score', value: 0.9, key: 'judge', delay_ms: 838, reward: 49.5 },
    { type: 'dispatched', time: T0 + 200, ...base, trace_id: 'ep-0:3', action: 'set_units', params: { units: 'kelvin' } },
    {
      type: 'error',
      time: T0 + 201,
      instance_id: 'ep-0',
      trace_id: 'ep-0:3',
      error: { code: 'PARAMS_INVALID', message: "params of 'set_units' do not match its schema", issues: [{ pointer: '/units', message: 'must be equal to one of the allowed values', value: 'kelvin' }] },
    },
    { type: 'trace_settled', time: T0 + 201, ...base, trace_id: 'ep-0:3', step: 3, action: 'set_units', seq_before: 2, status: 'failed', reward: 0, done: false, seq: 2, duration_ms: 1, params: { units: 'kelvin' }, rewards: {} },
    { type: 'dispatched', time: T0 + 300, ...base, trace_id: 'ep-0:4', action: 'get_forecast', params: { days: 3 } },
  );
  return feed;
}

const ESC = '\u001B';
const keys = { down: `${ESC}[B`, right: `${ESC}[C`, left: `${ESC}[D`, enter: '\r', escape: ESC, tab: '\t' };

let mounted: { unmount(): void } | undefined;
afterEach(() => mounted?.unmount());

async function open(feed: DebugFeed, options: { pane?: PaneName; color?: boolean } = {}) {
  const r = render(<DebugConsole feed={feed} size={{ columns: 80, rows: 24 }} color={options.color ?? true} {...(options.pane ? { initialPane: options.pane } : {})} />);
  mounted = r;
  const frame = (): string => r.lastFrame() ?? '';
  const settle = async (): Promise<void> => {
    // Effects, async loads and ink's render are a few ticks away.
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  const press = async (...input: string[]): Promise<string> => {
    for (const k of input) {
      r.stdin.write(k);
      await settle();
    }
    return frame();
  };
  await settle();
  return { frame, press, settle };
}

const ANSI = new RegExp(`${ESC}\\[[0-9;]*m`, 'g');
const plain = (s: string): string => s.replace(ANSI, '');

function fitsScreen(frame: string): void {
  const lines = plain(frame).split('\n');
  expect(lines.length).toBeLessThanOrEqual(24);
  for (const line of lines) expect([...line].length, line).toBeLessThanOrEqual(80);
}

describe('Traces pane', () => {
  it('lists pending traces first with their age, then settled ones with status, time, attempts and error', async () => {
    const { frame } = await open(recordedRun());
    const text = plain(frame());
    expect(text).toContain('Traces 4 · 1 pending · 1 failed');
    const lines = text.split('\n');
    const row = (id: string): string => lines.find((l) => l.includes(`${id} `)) ?? '';
    expect(lines.findIndex((l) => l.includes('ep-0:4'))).toBeLessThan(lines.findIndex((l) => l.includes('ep-0:1 ')));
    expect(row('ep-0:4')).toMatch(/get_forecast\s+pending\s+600ms/);
    expect(row('ep-0:1')).toMatch(/get_weather\s+resolved\s+52ms\s+1/);
    expect(row('ep-0:3')).toMatch(/set_units\s+failed\s+1ms\s+PARAMS_INVALID/);
    fitsScreen(frame());
  });

  it('/ searches by field (status:failed) and words; Esc clears; Enter opens the trace in Timeline', async () => {
    const { press } = await open(recordedRun());
    let text = plain(await press('/', ...'status:failed', keys.enter));
    expect(text).toContain('(1 match)');
    expect(text).toContain('ep-0:3');
    expect(text).not.toContain('ep-0:1 ');
    text = plain(await press(keys.escape));
    expect(text).toContain('ep-0:1');
    text = plain(await press('/', ...'tool:get_forecast', keys.enter, keys.enter));
    expect(text).toContain('Timeline episode 0 (ep-0)');
  });
});

describe('Timeline pane', () => {
  it('draws each trace on the episode axis with its commit and rewards, late ones flagged; lists the selected trace events', async () => {
    const { frame, press } = await open(recordedRun(), { pane: 'Timeline' });
    const text = plain(frame());
    expect(text).toContain('Timeline episode 0 (ep-0) · 4 traces');
    const first = text.split('\n').find((l) => l.includes('ep-0:1 ')) ?? '';
    expect(first).toMatch(/━.*◆/);
    expect(first).toContain('late');
    expect(text).toMatch(/\+0ms\s+dispatched\s+\{"city":"paris"\}/);
    expect(text).toMatch(/\+51ms\s+state_committed\s+seq 1/);
    fitsScreen(frame());
    // Enter: the state after that trace.
    expect(plain(await press(keys.enter))).toContain('State episode 0 · seq 1/2');
  });
});

describe('State pane', () => {
  it('shows the state as a tree at a seq; ←/→ step through the commits with the patch as a diff; Enter expands', async () => {
    const { frame, press } = await open(recordedRun(), { pane: 'State' });
    let text = plain(frame());
    expect(text).toContain('seq 2/2');
    expect(text).toMatch(/city: "rome" \*/);
    expect(text).toContain('+ /history/-: "rome"');
    expect(text).toContain('~ /city: "paris" → "rome"');
    text = plain(await press(keys.left));
    expect(text).toContain('seq 1/2');
    expect(text).toMatch(/temperature: 12 \*/);
    expect(text).toContain('~ /temperature: 10 → 12');
    text = plain(await press(keys.left));
    expect(text).toContain('seq 0/2 · initial');
    expect(text).toContain('temperature: 10');
    // Down to history (an array), expand it at the last seq.
    text = plain(await press(keys.right, keys.right, keys.down, keys.down, keys.down, keys.enter));
    expect(text).toContain('▾ history: [1]');
    expect(text).toContain('0: "rome"');
    fitsScreen(frame());
  });

  it('f lists every change to the field under the cursor', async () => {
    const { press } = await open(recordedRun(), { pane: 'State' });
    const text = plain(await press(keys.down, keys.down, 'f'));
    expect(text).toContain('changes to /temperature: 1');
    expect(text).toMatch(/seq\s+0\s+10/);
    expect(text).toMatch(/seq\s+1 ep-0:1\s+12/);
  });
});

describe('Rewards pane', () => {
  it('shows per step and source the value, status, delay and deadline, with counts per source; late values kept beside the imputed one', async () => {
    const { frame } = await open(recordedRun(), { pane: 'Rewards' });
    const text = plain(frame());
    expect(text).toContain('Rewards 2 values');
    expect(text).toMatch(/llm_score\s+0 arrived · 0 pending · 0 imputed · 1 late · 0 failed/);
    const late = text.split('\n').find((l) => l.includes('llm_score') && l.includes('ep-0:1')) ?? '';
    expect(late).toMatch(/late\s+0\.9 \(kept 0\.5\)\s+838ms\s+10:00:00\.5/);
    fitsScreen(frame());
  });

  it('colours late values red, and NO_COLOR (color=false) keeps the words and drops the colour', async () => {
    const coloured = await open(recordedRun(), { pane: 'Rewards' });
    expect(coloured.frame()).toMatch(new RegExp(`${ESC}\\[31mlate`));
    mounted?.unmount();
    const bare = await open(recordedRun(), { pane: 'Rewards', color: false });
    expect(bare.frame()).not.toMatch(new RegExp(`${ESC}\\[3[1-6]m`));
    expect(plain(bare.frame())).toContain('late');
  });
});

describe('Validation pane', () => {
  it('lists each violation with its kind, trace, JSON pointer and the offending value', async () => {
    const { frame } = await open(recordedRun(), { pane: 'Validation' });
    const text = plain(frame());
    expect(text).toContain('Validation 1 violations');
    expect(text).toMatch(/params\s+ep-0:3\s+set_units\s+\/units\s+must be equal/);
    expect(text).toContain('value: "kelvin"');
    fitsScreen(frame());
  });
});

describe('the console', () => {
  it('switches panes with 1–5 and Tab, lists them in the footer, and shows help on ?', async () => {
    const { frame, press } = await open(recordedRun());
    expect(plain(frame())).toContain(' 1 Traces  2 Timeline  3 State  4 Rewards  5 Validation  ? help / search q quit');
    expect(plain(await press('5'))).toContain('Validation 1 violations');
    expect(plain(await press(keys.tab))).toContain('Traces 4');
    const help = plain(await press('?'));
    expect(help).toContain('Keys');
    expect(help).toContain('previous / next seq');
    expect(plain(await press(keys.escape))).toContain('Traces 4');
  });

  it('follows a live feed: new traces appear and pending ages move without a key', async () => {
    const feed = recordedRun();
    feed.phase = 'live';
    vi.useFakeTimers({ toFake: ['setInterval', 'Date'] });
    try {
      vi.setSystemTime(T0 + 1_000);
      const { frame, settle } = await open(feed);
      feed.push({ type: 'dispatched', time: T0 + 900, instance_id: 'ep-0', episode: 0, trace_id: 'ep-0:5', action: 'get_weather', params: {} });
      vi.setSystemTime(T0 + 8_000);
      vi.advanceTimersByTime(100);
      await settle();
      const text = plain(frame());
      expect(text).toContain('· live ·');
      expect(text).toContain('2 pending');
      expect(text).toMatch(/ep-0:4\s+0\s+get_forecast\s+pending\s+7\.8s/);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps a frame of 10,000 pending traces on the screen, oldest first', async () => {
    const feed = new MemoryFeed();
    feed.push({ type: 'episode_started', time: T0, instance_id: 'ep-0', episode: 0, initial_state_id: 'initial-0' });
    for (let i = 0; i < 10_000; i++) feed.push({ type: 'dispatched', time: T0 + i, instance_id: 'ep-0', episode: 0, trace_id: `ep-0:${i + 1}`, action: 'slow_tool', params: {} });
    const { frame } = await open(feed);
    const text = plain(frame());
    expect(text).toContain('10,000 pending');
    expect(text).toMatch(/▸ ep-0:1\s/);
    fitsScreen(frame());
  });
});

/**
 * Every trace of the run in a virtualised table: only the rows in sight are fetched and drawn, so
 * a run of a million events scrolls like one of ten. Filters by tool, status, episode and text
 * (the terminal console's search: `tool:x status:failed ep:3` terms and free words).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { TracePage } from '../../src/console/api-types.js';
import { query, useApi } from '../api.js';
import { clock, count, ms, num } from '../format.js';
import type { ViewProps } from '../nav.js';

const ROW = 26;
const OVERSCAN = 20;

export function TracesView({ nav, go, version }: ViewProps) {
  const [q, setQ] = useState('');
  const [tool, setTool] = useState(nav.tool ?? '');
  const [status, setStatus] = useState(nav.status ?? '');
  const [episode, setEpisode] = useState('');
  const [order, setOrder] = useState<'asc' | 'desc'>('asc');
  const [top, setTop] = useState(0);
  const [height, setHeight] = useState(600);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setHeight(el.clientHeight));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  // A new filter starts at the top.
  useEffect(() => {
    box.current?.scrollTo(0, 0);
    setTop(0);
  }, [q, tool, status, episode, order]);
  const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
  const limit = Math.ceil(height / ROW) + 2 * OVERSCAN;
  // Fetch in aligned windows, so a small scroll reuses the window in hand.
  const offset = Math.floor(first / OVERSCAN) * OVERSCAN;
  const { value: page, error } = useApi<TracePage>(`/api/traces${query({ q, tool, status, episode, order, offset, limit: limit + OVERSCAN })}`, version);
  const total = page?.total ?? 0;
  const rows = page?.rows ?? [];
  return (
    <div class="traces">
      <div class="filters">
        <input type="search" placeholder="search: words, or tool:x status:failed ep:3 code:TOOL_TIMEOUT" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} aria-label="search" />
        <select value={tool} onChange={(e) => setTool((e.target as HTMLSelectElement).value)} aria-label="tool">
          <option value="">every tool</option>
          {(page?.tools ?? (tool ? [tool] : [])).map((t) => (
            <option key={t} value={t}>{t}</option>
          ))}
        </select>
        <select value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)} aria-label="status">
          <option value="">every status</option>
          <option value="pending">pending</option>
          <option value="resolved">resolved</option>
          <option value="failed">failed</option>
        </select>
        <input class="narrow" type="number" min="0" placeholder="episode" value={episode} onInput={(e) => setEpisode((e.target as HTMLInputElement).value)} aria-label="episode" />
        <select value={order} onChange={(e) => setOrder((e.target as HTMLSelectElement).value as 'asc' | 'desc')} aria-label="order">
          <option value="asc">oldest first</option>
          <option value="desc">newest first</option>
        </select>
        <span class="muted" data-total={total}>{count(total)} traces</span>
      </div>
      {error && <p class="bad">{error}</p>}
      <div class="thead grid-traces">
        <span>trace</span><span class="n">ep</span><span class="n">step</span><span>tool</span><span>status</span><span>dispatched</span><span class="n">duration</span><span class="n">tries</span><span>rewards</span><span>error</span>
      </div>
      <div class="scroller" ref={box} onScroll={(e) => setTop((e.target as HTMLDivElement).scrollTop)}>
        <div style={{ height: `${total * ROW}px`, position: 'relative' }}>
          {rows.map((t, i) => (
            <div
              key={t.trace_id}
              class={`row grid-traces ${t.status}${nav.trace === t.trace_id ? ' selected' : ''}`}
              style={{ top: `${(page?.offset ?? 0) * ROW + i * ROW}px`, height: `${ROW}px` }}
              data-trace={t.trace_id}
              onClick={() => go({ view: 'timeline', episode: t.episode, trace: t.trace_id })}
              title="open in the timeline"
            >
              <span class="mono">{t.trace_id}</span>
              <span class="n">{t.episode}</span>
              <span class="n">{t.step ?? '–'}</span>
              <span>{t.action}</span>
              <span class={`status ${t.status}`}>{t.status}</span>
              <span class="mono">{clock(t.dispatched_at)}</span>
              <span class="n">{ms(t.duration_ms)}</span>
              <span class="n">{t.attempts ?? '–'}</span>
              <span>{(t.rewards ?? []).map((r) => `${r.source} ${r.value !== undefined ? num(r.value) : r.status}`).join(', ')}</span>
              <span class="bad" title={t.error?.message}>{t.error ? `${t.error.code}: ${t.error.message}` : ''}</span>
            </div>
          ))}
        </div>
      </div>
    </div>
  );
}

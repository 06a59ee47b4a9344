/**
 * One episode on a real time axis: each trace a bar from dispatch to settle (the part it waited
 * for a slot lighter), commits marked on their own lane, every reward's arrival on its step's row
 * (late ones red). Wheel zooms around the pointer, dragging pans; hovering a trace's row gives its timings.
 * Clicking a bar selects it; its seq opens in the state explorer.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { EpisodeTimeline, TimelineTrace, TimelineTurn } from '../../src/console/api-types.js';
import { useApi } from '../api.js';
import { ms, num } from '../format.js';
import type { ViewProps } from '../nav.js';
import { EpisodePicker, useEpisodes } from './episode-picker.js';

const LABEL = 220;
/** Ids of the environment's part shown before the generated ones (the rest is counted). */
const ENV_SHOWN = 48;

/** The model turn that chose a step: the last turn at or before it (a turn's later calls are later steps). */
function turnOf(tl: EpisodeTimeline, step: number | undefined): TimelineTurn | undefined {
  if (step === undefined) return undefined;
  let found: TimelineTurn | undefined;
  for (const t of tl.turns) if (t.step <= step) found = t;
  return found;
}

/** A token-mode turn beside its trace: the environment's ids (masked, not trained on), then each generated id with its text and logprob. */
function TurnTokens({ turn }: { readonly turn: TimelineTurn | undefined }) {
  if (!turn) return null;
  const env = turn.env_ids.slice(-ENV_SHOWN);
  return (
    <div class="turn-tokens" data-turn-step={turn.step}>
      <p>
        model turn: prompt {num(turn.prompt_length)} tokens ({num(turn.env_ids.length)} from the environment, loss mask 0) · {num(turn.token_ids.length)} generated (mask 1) · {turn.finish_reason}
        {turn.invalid !== undefined && <span class="bad"> · invalid: {turn.invalid}</span>}
        {turn.drift && <span class="bad"> · drift at {turn.drift.at}: {turn.drift.message}</span>}
      </p>
      <div class="tokens">
        {turn.env_ids.length > env.length && <span class="tok env">… {num(turn.env_ids.length - env.length)} more</span>}
        {env.map((id, i) => (
          <span key={`e${i}`} class="tok env" title="the environment's (mask 0)">
            {id}
          </span>
        ))}
        {turn.token_ids.map((id, i) => (
          <span key={`g${i}`} class="tok gen" title={`id ${id} · logprob ${turn.logprobs[i]?.toFixed(4) ?? ''} (mask 1)`}>
            <b>{JSON.stringify(turn.token_strs?.[i] ?? '').slice(1, -1) || '∅'}</b> {id} <i>{turn.logprobs[i]?.toFixed(3)}</i>
          </span>
        ))}
      </div>
      <pre class="turn-text">{turn.text}</pre>
    </div>
  );
}

interface Hover {
  readonly x: number;
  readonly y: number;
  readonly trace: TimelineTrace;
}

function ticks(from: number, to: number, width: number): number[] {
  const span = Math.max(1e-3, to - from);
  const target = span / Math.max(1, width / 110);
  const pow = 10 ** Math.floor(Math.log10(target));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= target) ?? pow * 10;
  const out: number[] = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) out.push(t);
  return out;
}

export function TimelineView({ nav, go, version }: ViewProps) {
  const { page: episodes, episode, events } = useEpisodes(version, nav.episode);
  const { value: tl, error } = useApi<EpisodeTimeline>(episode === undefined ? undefined : `/api/episodes/${episode}/timeline`, events);
  const [width, setWidth] = useState(800);
  const [window_, setWindow] = useState<[number, number] | undefined>(undefined);
  const [hover, setHover] = useState<Hover | undefined>(undefined);
  const area = useRef<HTMLDivElement>(null);
  const drag = useRef<{ x: number; from: number; to: number } | undefined>(undefined);
  useEffect(() => {
    const el = area.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setWidth(Math.max(100, el.clientWidth - LABEL)));
    observer.observe(el);
    return () => observer.disconnect();
  }, [tl !== undefined]);
  useEffect(() => setWindow(undefined), [episode]);

  const now = Date.now();
  const extent = useMemo((): [number, number] => {
    if (!tl) return [0, 1];
    const end = Math.max(tl.finished_at ?? 0, ...tl.traces.map((t) => t.settled_at ?? now), ...tl.rewards.map((r) => r.time));
    return [0, Math.max(1, end - tl.started_at)];
  }, [tl]);
  const [from, to] = window_ ?? extent;
  const x = (t: number): number => ((t - (tl?.started_at ?? 0) - from) / (to - from)) * width;

  const onWheel = (e: WheelEvent): void => {
    e.preventDefault();
    const rect = (e.currentTarget as HTMLElement).getBoundingClientRect();
    const at = from + ((e.clientX - rect.left - LABEL) / width) * (to - from);
    const k = e.deltaY > 0 ? 1.25 : 0.8;
    setWindow([at - (at - from) * k, at + (to - at) * k]);
  };
  const onDown = (e: MouseEvent): void => {
    drag.current = { x: e.clientX, from, to };
  };
  const onMove = (e: MouseEvent): void => {
    const d = drag.current;
    if (!d || e.buttons !== 1) return;
    const shift = ((e.clientX - d.x) / width) * (d.to - d.from);
    if (Math.abs(e.clientX - d.x) > 2) setWindow([d.from - shift, d.to - shift]);
  };
  const zoom = (k: number): void => {
    const mid = (from + to) / 2;
    setWindow([mid - ((to - from) / 2) * k, mid + ((to - from) / 2) * k]);
  };

  const selected = tl?.traces.find((t) => t.trace_id === nav.trace);
  const rewardsOf = useMemo(() => {
    const by = new Map<string, EpisodeTimeline['rewards'][number][]>();
    for (const r of tl?.rewards ?? []) by.set(r.trace_id, [...(by.get(r.trace_id) ?? []), r]);
    return by;
  }, [tl]);

  return (
    <div class="timeline">
      <div class="filters">
        <EpisodePicker page={episodes} episode={episode} onPick={(n) => go({ view: 'timeline', episode: n })} />
        <button onClick={() => zoom(0.5)} title="zoom in (or the wheel)">+</button>
        <button onClick={() => zoom(2)} title="zoom out">−</button>
        <button onClick={() => setWindow(undefined)} title="the whole episode">fit</button>
        <span class="legend">
          <i class="sw resolved" /> resolved <i class="sw failed" /> failed <i class="sw pending" /> pending <i class="sw queued" /> waiting for a slot <i class="mk commit" /> commit <i class="mk arrived" /> reward <i class="mk late" /> late <i class="mk imputed" /> imputed
        </span>
      </div>
      {error && <p class="bad">{error}</p>}
      {!tl && !error && <p class="muted">{episode === undefined ? 'no episode yet' : 'loading…'}</p>}
      {tl && (
        <div class="lanes" ref={area} onWheel={onWheel} onMouseDown={onDown} onMouseMove={onMove} onMouseUp={() => (drag.current = undefined)} onMouseLeave={() => setHover(undefined)}>
          <div class="axis" style={{ marginLeft: `${LABEL}px` }}>
            {ticks(from, to, width).map((t) => (
              <span key={t} class="tick" style={{ left: `${((t - from) / (to - from)) * width}px` }}>
                {ms(t)}
              </span>
            ))}
          </div>
          <div class="lane commits">
            <span class="label">commits ({tl.commits.length})</span>
            <div class="track">
              {tl.commits.map((c) => (
                <span key={c.seq} class="mk commit" data-seq={c.seq} style={{ left: `${x(c.time)}px` }} title={`seq ${c.seq} at +${ms(c.time - tl.started_at)}${c.trace_id ? ` (${c.trace_id})` : ''}: open its state`} onClick={() => go({ view: 'state', episode: tl.episode, seq: c.seq })} />
              ))}
            </div>
          </div>
          {tl.traces.map((t) => {
            const end = t.settled_at ?? now;
            const left = x(t.dispatched_at);
            const started = t.started_at !== undefined ? x(t.started_at) : left;
            return (
              // The whole row hovers its trace: a short bar is mostly covered by its own reward markers
              // (8 px, drawn over the bar where they land), so the bar alone is no target.
              <div key={t.trace_id} class={`lane${t.trace_id === nav.trace ? ' selected' : ''}`} onMouseMove={(e) => setHover({ x: e.clientX, y: e.clientY, trace: t })} onMouseLeave={() => setHover(undefined)}>
                <span class="label" title={t.trace_id}>
                  {t.step !== undefined ? `${t.step}. ` : ''}
                  {t.action}
                </span>
                <div class="track">
                  <span
                    class={`barbox ${t.status}`}
                    data-trace={t.trace_id}
                    style={{ left: `${left}px`, width: `${Math.max(2, x(end) - left)}px` }}
                    onClick={() => go({ view: 'timeline', episode: tl.episode, trace: t.trace_id })}
                    onDblClick={() => t.seq !== undefined && go({ view: 'state', episode: tl.episode, seq: t.seq })}
                  >
                    {started > left && <span class="queued" style={{ width: `${started - left}px` }} />}
                  </span>
                  {(rewardsOf.get(t.trace_id) ?? []).map((r, i) => (
                    <span key={i} class={`mk ${r.kind}`} style={{ left: `${x(r.time)}px` }} title={`${r.source} ${r.kind}${r.value !== undefined ? ` ${num(r.value)}` : ''}${r.delay_ms !== undefined ? ` after ${ms(r.delay_ms)}` : ''}`} />
                  ))}
                </div>
              </div>
            );
          })}
        </div>
      )}
      {hover && (
        <div class="tooltip" style={{ left: `${hover.x + 12}px`, top: `${hover.y + 12}px` }} data-tooltip={hover.trace.trace_id}>
          <b>{hover.trace.trace_id}</b> {hover.trace.action} · {hover.trace.status}
          <br />
          dispatched +{ms(hover.trace.dispatched_at - (tl?.started_at ?? 0))}
          {hover.trace.started_at !== undefined && <><br />started after {ms(hover.trace.started_at - hover.trace.dispatched_at)}</>}
          {hover.trace.tool_finished_at !== undefined && <><br />tool done after {ms(hover.trace.tool_finished_at - hover.trace.dispatched_at)}</>}
          <br />
          settled {hover.trace.duration_ms !== undefined ? `after ${ms(hover.trace.duration_ms)}` : '– (pending)'}
          {hover.trace.attempts !== undefined && hover.trace.attempts > 1 && <><br />{hover.trace.attempts} attempts</>}
          {hover.trace.error && <><br /><span class="bad">{hover.trace.error.code}: {hover.trace.error.message}</span></>}
        </div>
      )}
      {selected && tl && (
        <div class="details" data-selected={selected.trace_id}>
          <b>{selected.trace_id}</b> · step {selected.step ?? '–'} · {selected.action} · <span class={`status ${selected.status}`}>{selected.status}</span> · dispatched +{ms(selected.dispatched_at - tl.started_at)} · {selected.duration_ms !== undefined ? `settled after ${ms(selected.duration_ms)}` : 'in flight'}
          {selected.error && <span class="bad"> · {selected.error.code}: {selected.error.message}</span>}
          {selected.seq !== undefined && (
            <button class="go" data-open-state={selected.seq} onClick={() => go({ view: 'state', episode: tl.episode, seq: selected.seq, trace: selected.trace_id })}>
              state at seq {selected.seq} →
            </button>
          )}
          <TurnTokens turn={turnOf(tl, selected.step)} />
        </div>
      )}
    </div>
  );
}

/**
 * Reward flow, per source: where its values stand, how long they took to arrive (a histogram on a
 * log scale: a judge's 200 ms and a reviewer's day on one axis), what is still awaited with its
 * deadline counting down, and what came late (red), was imputed, or never came.
 */
import { useEffect, useState } from 'preact/hooks';
import type { RewardFlow, RewardSourceFlow } from '../../src/console/api-types.js';
import { useApi } from '../api.js';
import { count, ms, num, pct } from '../format.js';
import type { ViewProps } from '../nav.js';

function Histogram({ delays }: { readonly delays: RewardSourceFlow['delays'] }) {
  const used = delays.map((d, i) => ({ ...d, i })).filter((d) => d.count > 0);
  if (used.length === 0) return <p class="muted">no value has arrived yet</p>;
  // At least eight buckets, so one delay of every value is one bar among its neighbours, not a wall.
  const lo = Math.max(0, Math.min((used[0]?.i ?? 0) - 1, delays.length - 8));
  const hi = Math.min(delays.length - 1, Math.max((used[used.length - 1]?.i ?? 0) + 1, lo + 7));
  const shown = delays.slice(lo, hi + 1);
  const max = Math.max(...shown.map((d) => d.count));
  const w = 480;
  const h = 90;
  const bw = w / shown.length;
  return (
    <svg class="chart" viewBox={`0 0 ${w} ${h + 30}`} role="img" aria-label="arrival delays">
      {shown.map((d, i) => (
        <g key={i}>
          <rect x={i * bw + 1} y={h - (d.count / max) * h} width={bw - 2} height={(d.count / max) * h}>
            <title>{`≤ ${d.le_ms === null ? '∞' : ms(d.le_ms)}: ${count(d.count)}${d.late > 0 ? `, ${count(d.late)} of them late` : ''}`}</title>
          </rect>
          {d.late > 0 && <rect class="late" x={i * bw + 1} y={h - (d.late / max) * h} width={bw - 2} height={(d.late / max) * h} />}
          {(shown.length <= 8 || i % Math.ceil(shown.length / 8) === 0) && (
            <text x={i * bw + bw / 2} y={h + 14} text-anchor="middle">
              {d.le_ms === null ? 'more' : `≤${ms(d.le_ms)}`}
            </text>
          )}
        </g>
      ))}
      <text x={w / 2} y={h + 28} text-anchor="middle">delay from step to arrival (red: after the deadline)</text>
    </svg>
  );
}

const STATUSES = ['arrived', 'pending', 'late', 'fallback', 'failed'] as const;
const LABEL: Readonly<Record<string, string>> = { arrived: 'arrived', pending: 'pending', late: 'late', fallback: 'imputed', failed: 'failed' };

export function RewardsView({ go, version }: ViewProps) {
  const { value: flow, error } = useApi<RewardFlow>('/api/rewards', version);
  const [fetched, setFetched] = useState(Date.now());
  const [tick, setTick] = useState(Date.now());
  useEffect(() => setFetched(Date.now()), [flow]);
  // Live deadlines count down between updates.
  useEffect(() => {
    if (!flow?.live) return;
    const t = window.setInterval(() => setTick(Date.now()), 250);
    return () => clearInterval(t);
  }, [flow?.live]);
  if (error) return <p class="bad">{error}</p>;
  if (!flow) return <p class="muted">loading…</p>;
  if (flow.sources.length === 0) return <p class="muted">no reward source has reported yet</p>;
  const now = flow.now + (flow.live ? tick - fetched : 0);
  return (
    <div class="rewards">
      {flow.sources.map((s) => (
        <section key={s.source} class="source" data-source={s.source}>
          <h2>
            {s.source} <span class="muted">on time {pct(s.on_time)}</span>
          </h2>
          <div class="chips">
            {STATUSES.map((st) => (
              <span key={st} class={`chip ${st}`} data-status={st}>
                {LABEL[st]} {count(s.counts[st])}
              </span>
            ))}
          </div>
          <div class="columns">
            <div>
              <Histogram delays={s.delays} />
            </div>
            <div>
              <h3>Awaited {s.pending.length > 0 ? `(${count(s.counts.pending)})` : ''}</h3>
              {s.pending.length === 0 ? (
                <p class="muted">nothing pending</p>
              ) : (
                <table>
                  <tbody>
                    {s.pending.slice(0, 20).map((p) => {
                      const left = p.deadline_at === undefined ? undefined : p.deadline_at - now;
                      return (
                        <tr key={`${p.trace_id}`} class="link" onClick={() => go({ view: 'timeline', episode: p.episode, trace: p.trace_id })}>
                          <td class="mono">{p.trace_id}</td>
                          <td>ep {p.episode} step {p.step}</td>
                          <td class={left !== undefined && left < 0 ? 'n bad' : 'n'} data-deadline={p.deadline_at}>
                            {left === undefined ? 'no deadline' : left >= 0 ? `deadline in ${ms(left)}` : `${ms(-left)} past deadline`}
                          </td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              )}
            </div>
          </div>
          {s.missed.length > 0 && (
            <>
              <h3>Late, imputed or failed</h3>
              <table class="missed">
                <tbody>
                  {s.missed.slice(0, 50).map((m) => (
                    <tr key={`${m.trace_id}`} class={`link ${m.status}`} onClick={() => go({ view: 'timeline', episode: m.episode, trace: m.trace_id })}>
                      <td class="mono">{m.trace_id}</td>
                      <td>ep {m.episode} step {m.step}</td>
                      <td class={m.status === 'late' || m.status === 'failed' ? 'bad' : 'muted'}>{LABEL[m.status]}</td>
                      <td>
                        {m.status === 'late' ? `${num(m.late_value)} after ${ms(m.delay_ms)}${m.value !== undefined ? ` (imputed ${num(m.value)} stands)` : ''}` : m.value !== undefined ? `${num(m.value)}${m.reason ? ` — ${m.reason}` : ''}` : (m.reason ?? '')}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
        </section>
      ))}
    </div>
  );
}

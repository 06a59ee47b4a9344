/** Run overview: progress, throughput, errors by tool, each reward source's SLA, episodes, a benchmark run's report, and a served run's rollouts curriculum. */
import type { EpisodePage, Overview } from '../../src/console/api-types.js';
import { query, useApi } from '../api.js';
import { clock, count, ms, num, pct } from '../format.js';
import type { ViewProps } from '../nav.js';

function Throughput({ t }: { readonly t: Overview['throughput'] }) {
  const max = Math.max(1, ...t.counts);
  const n = Math.max(1, t.counts.length);
  return (
    <div class="throughput">
      <svg class="chart" viewBox={`0 0 ${n} 100`} preserveAspectRatio="none" role="img" aria-label="steps settled over time">
        {t.counts.map((c, i) => (
          <rect key={i} x={i + 0.1} y={100 - (c / max) * 100} width={0.8} height={(c / max) * 100}>
            <title>{`+${ms(i * t.bucket_ms)}: ${count(c)} steps (${num(c / (t.bucket_ms / 1000))}/s)`}</title>
          </rect>
        ))}
      </svg>
      <div class="axis-labels muted">
        <span>0</span>
        <span>{`peak ${num(Math.round((max / (t.bucket_ms / 1000)) * 10) / 10)} steps/s, in buckets of ${ms(t.bucket_ms)}`}</span>
        <span>{ms(t.counts.length * t.bucket_ms)}</span>
      </div>
    </div>
  );
}

export function OverviewView({ go, version }: ViewProps) {
  const { value: o, error } = useApi<Overview>('/api/overview', version);
  // The newest hundred episodes: a run can have tens of thousands.
  const { value: eps } = useApi<EpisodePage>(o ? `/api/episodes${query({ offset: Math.max(0, o.episodes.seen - 100), limit: 100 })}` : undefined, version);
  if (error) return <p class="bad">{error}</p>;
  if (!o) return <p class="muted">loading…</p>;
  const run = o.run;
  const bench = o.benchmark;
  const cur = o.curriculum;
  return (
    <div class="overview">
      <section class="cards">
        <div class="card">
          <h3>Run</h3>
          <div class="big">{run?.run_id ?? o.title}</div>
          <div class="muted">
            {run ? `${run.env} · policy ${run.policy} · ${run.status}` : 'no run_started event yet'}
            {run?.finished_at !== undefined ? ` · ${ms(run.finished_at - run.started_at)}` : ''}
          </div>
        </div>
        <div class="card">
          <h3>Episodes</h3>
          <div class="big" data-stat="episodes">
            {count(o.episodes.finished)} / {count(run?.episodes ?? o.episodes.seen)}
          </div>
          <div class="muted">{count(o.episodes.seen)} started</div>
          {run && run.episodes > 0 && <div class="bar"><div style={{ width: `${(o.episodes.finished / run.episodes) * 100}%` }} /></div>}
        </div>
        <div class="card">
          <h3>Steps</h3>
          <div class="big" data-stat="steps">{count(o.traces.settled)}</div>
          <div class="muted">
            {count(o.traces.pending)} in flight · <span class={o.traces.failed > 0 ? 'bad' : ''}>{count(o.traces.failed)} failed</span>
          </div>
        </div>
        <div class="card">
          <h3>Throughput</h3>
          <div class="big">{o.steps_per_s === null ? '–' : `${num(Math.round(o.steps_per_s * 10) / 10)}/s`}</div>
          <div class="muted">{o.run?.status === 'running' ? 'last 5 s' : 'over the run'}</div>
        </div>
        <div class="card">
          <h3>Violations</h3>
          <div class={o.violations > 0 ? 'big bad' : 'big'}>{count(o.violations)}</div>
          <div class="muted">
            <a onClick={() => go({ view: 'validation' })}>schema validation →</a>
          </div>
        </div>
      </section>
      <section>
        <h2>Steps settled over time</h2>
        <Throughput t={o.throughput} />
      </section>
      <div class="columns">
        <section>
          <h2>Errors by tool</h2>
          {o.errors_by_tool.length === 0 ? (
            <p class="muted">no failed step</p>
          ) : (
            <table>
              <thead>
                <tr><th>tool</th><th>code</th><th class="n">steps</th></tr>
              </thead>
              <tbody>
                {o.errors_by_tool.map((e) => (
                  <tr key={`${e.tool}/${e.code}`} class="link" onClick={() => go({ view: 'traces', tool: e.tool, status: 'failed' })}>
                    <td>{e.tool}</td><td class="bad">{e.code}</td><td class="n">{count(e.count)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>
        <section>
          <h2>Reward SLA</h2>
          {o.rewards.length === 0 ? (
            <p class="muted">no reward source has reported</p>
          ) : (
            <table>
              <thead>
                <tr><th>source</th><th class="n">on time</th><th class="n">arrived</th><th class="n">late</th><th class="n">imputed</th><th class="n">failed</th><th class="n">pending</th></tr>
              </thead>
              <tbody>
                {o.rewards.map((r) => (
                  <tr key={r.source} class="link" onClick={() => go({ view: 'rewards' })}>
                    <td>{r.source}</td><td class="n">{pct(r.on_time)}</td><td class="n">{count(r.counts.arrived)}</td><td class={r.counts.late > 0 ? 'n bad' : 'n'}>{count(r.counts.late)}</td><td class="n">{count(r.counts.fallback)}</td><td class={r.counts.failed > 0 ? 'n bad' : 'n'}>{count(r.counts.failed)}</td><td class="n">{count(r.counts.pending)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>
      </div>
      {bench && (
        <section class="benchmark">
          <h2>
            Benchmark: {bench.suite} · {bench.policy} · {bench.trials} trial{bench.trials === 1 ? '' : 's'}
          </h2>
          <p>
            success <b>{pct(bench.success_rate?.value)}</b>
            {bench.success_rate ? ` (95 % CI ${pct(bench.success_rate.ci_low)} – ${pct(bench.success_rate.ci_high)})` : ''} over {count(bench.tasks.length)} tasks in {ms(bench.duration_ms)}; failed tasks first:
          </p>
          <div class="strip">
            {[...bench.tasks].sort((a, b) => Number(a.success) - Number(b.success)).map((t) => (
              <span key={t.id} class={t.success ? 'cell ok' : 'cell bad'} title={`${t.id}: ${t.success ? 'success' : 'failed'}, reward ${num(t.reward)}`} onClick={() => t.episodes[0] !== undefined && go({ view: 'timeline', episode: t.episodes[0] })} />
            ))}
          </div>
        </section>
      )}
      {cur && (
        <section class="curriculum">
          <h2>
            Curriculum: {count(cur.tasks.length)} task{cur.tasks.length === 1 ? '' : 's'} tried · {count(cur.draws)} drawn
          </h2>
          <p class="muted">the difficulty sampler's weight is 4·p·(1−p) for a task's recent success p: the tasks the policy is undecided on first{cur.tasks.length > 20 ? '; the first 20' : ''}</p>
          <table>
            <thead>
              <tr><th>task</th><th class="n">weight</th><th class="n">recent success</th><th class="n">mean reward</th><th class="n">episodes</th><th class="n">weights</th></tr>
            </thead>
            <tbody>
              {cur.tasks.slice(0, 20).map((t) => (
                <tr key={t.id}>
                  <td>{t.id}</td><td class="n">{num(t.weight)}</td><td class="n">{pct(t.recent_success)}</td><td class="n">{num(t.mean_reward)}</td><td class="n">{count(t.episodes)}</td><td class="n">{t.weight_version ?? '–'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      <section>
        <h2>Episodes</h2>
        <table class="episodes">
          <thead>
            <tr><th class="n">episode</th><th>instance</th><th>started</th><th class="n">steps</th><th class="n">reward</th><th>ended</th><th class="n">duration</th></tr>
          </thead>
          <tbody>
            {(eps?.rows ?? []).map((e) => (
              <tr key={e.episode} class="link" data-episode={e.episode} onClick={() => go({ view: 'timeline', episode: e.episode })}>
                <td class="n">{e.episode}</td><td>{e.instance_id}</td><td>{clock(e.started_at)}</td><td class="n">{e.steps ?? '–'}</td><td class="n">{num(e.reward)}{e.pending_rewards ? <span class="muted"> ({e.pending_rewards} pending)</span> : null}</td><td>{e.reason ?? 'running'}</td><td class="n">{e.finished_at !== undefined ? ms(e.finished_at - e.started_at) : '–'}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {eps && eps.total > eps.rows.length && <p class="muted">the newest {eps.rows.length} of {count(eps.total)} episodes; pick any in Timeline or State</p>}
      </section>
    </div>
  );
}

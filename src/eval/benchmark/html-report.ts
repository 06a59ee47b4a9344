/**
 * benchmark.html: the report as a page a person would rather look at than read — the headline
 * metrics, then charts drawn offline by Vega-Lite into inline SVG (success per task, reward
 * distribution, latency CDF per tool, cost per episode), then the tasks that failed and why.
 * One self-contained file: no script, no network.
 */
import type { BaselineComparison, BenchmarkReport } from './report.js';

type Spec = Record<string, unknown>;

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const pct = (n: number): string => `${(n * 100).toFixed(1)}%`;

async function svg(spec: Spec): Promise<string> {
  const [vega, { compile }] = await Promise.all([import('vega'), import('vega-lite')]);
  const compiled = compile({ $schema: 'https://vega.github.io/schema/vega-lite/v5.json', ...spec } as Parameters<typeof compile>[0]).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Per tool, the latency of every call (ms): the CDF chart's data. */
export type ToolLatencies = Readonly<Record<string, readonly number[]>>;

/** How the run compares with its baseline: per metric the paired difference and the verdict, the win rate, the tasks that flipped. */
function baselineSection(b: BaselineComparison): string {
  const num = (n: number): string => (Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(3));
  const rows = b.metrics.map((m) => `<tr><td>${esc(m.metric)}</td><td>${num(m.current)}</td><td>${num(m.baseline)}</td><td>${m.difference.value >= 0 ? '+' : ''}${num(m.difference.value)} (95% CI ${num(m.difference.ci_low)} – ${num(m.difference.ci_high)}, ${m.difference.pairs} pairs)</td><td>${Number.isFinite(m.allowed) ? num(m.allowed) : 'any'}</td><td${m.regression ? ' style="color:#d62728;font-weight:bold"' : ''}>${m.regression ? 'REGRESSED' : 'ok'}</td></tr>`);
  const flips = b.flipped.slice(0, 100).map((f) => `<tr><td>${esc(f.id)}</td><td>${f.trial}</td><td${f.now ? '' : ' style="color:#d62728"'}>${f.before ? 'passed' : 'failed'} → ${f.now ? 'passes' : 'fails'}</td></tr>`);
  return `<section><h2>Against baseline <code>${esc(b.baseline)}</code>: ${b.regressed ? '<span style="color:#d62728">regressed</span>' : 'no regression'}</h2>
<table><tr><th>metric</th><th>now</th><th>baseline</th><th>difference</th><th>allowed drop</th><th></th></tr>${rows.join('')}</table>
<p>win rate ${(b.win_rate.value * 100).toFixed(1)}% (${b.win_rate.wins} won, ${b.win_rate.losses} lost, ${b.win_rate.ties} tied)</p>
${flips.length > 0 ? `<table><tr><th>task</th><th>trial</th><th>flipped</th></tr>${flips.join('')}</table>${b.flipped.length > flips.length ? `<p>… ${b.flipped.length - flips.length} more</p>` : ''}` : '<p>no task flipped</p>'}</section>`;
}

export async function renderHtmlReport(report: BenchmarkReport, latencies: ToolLatencies): Promise<string> {
  const m = report.metrics;
  const perTask = report.tasks.map((t) => ({ task: t.id, success: t.trials.filter((x) => x.success).length / t.trials.length }));
  const rewards = report.tasks.flatMap((t) => t.trials.map((x) => ({ reward: x.reward })));
  // Past 20 tools a palette repeats colours: the 19 most called keep theirs, the rest are one line.
  const byCalls = Object.entries(latencies).sort((a, b) => b[1].length - a[1].length);
  const shown = new Set(byCalls.slice(0, byCalls.length > 20 ? 19 : 20).map(([tool]) => tool));
  const grouped = new Map<string, number[]>();
  for (const [tool, values] of byCalls) {
    const key = shown.has(tool) ? tool : `other (${byCalls.length - shown.size} tools)`;
    grouped.set(key, [...(grouped.get(key) ?? []), ...values]);
  }
  const cdf = [...grouped].flatMap(([tool, values]) => {
    const sorted = [...values].sort((a, b) => a - b);
    // At most 200 points per tool: the curve's shape, not every call.
    const stride = Math.max(1, Math.floor(sorted.length / 200));
    return sorted.filter((_, i) => i % stride === 0 || i === sorted.length - 1).map((ms, i, all) => ({ tool, ms, share: (i + 1) / all.length }));
  });
  const costs = report.tasks.flatMap((t) => t.trials.flatMap((x) => (x.cost?.usd !== undefined && x.cost.usd !== null ? [{ task: t.id, usd: x.cost.usd }] : [])));
  const sameReward = rewards.every((r) => r.reward === rewards[0]?.reward);
  // Past 25 tasks their names cannot all stand under the bars: the failed ones are listed below.
  // Nameless, they are sorted by how often they passed: the strip reads as a share.
  const many = perTask.length > 25;
  const labels = many ? { labels: false, ticks: false, title: `${perTask.length} tasks, by share of trials passed (failed ones listed below)` } : { labelAngle: -60, labelLimit: 160 };
  if (many) perTask.sort((a, b) => a.success - b.success);
  const charts: [string, Spec | string][] = [
    // One cell per task, coloured by the share of its trials that passed: a failed task stands out
    // (a bar of height 0 would not), at 8 tasks or 1,000.
    ['Success per task', { data: { values: perTask }, mark: 'rect', width: Math.min(960, Math.max(300, perTask.length * 7)), height: 40, encoding: { x: { field: 'task', type: 'nominal', sort: null, axis: labels }, color: { field: 'success', type: 'quantitative', scale: { domain: [0, 1], range: ['#d62728', '#2ca02c'] }, title: 'passed' } } }],
    // One value for every episode makes a histogram of one block: say it instead.
    ['Reward per episode', sameReward ? `every episode's reward is ${rewards[0]?.reward ?? 0} (${rewards.length} episodes)` : { data: { values: rewards }, mark: 'bar', width: 420, height: 160, encoding: { x: { field: 'reward', type: 'quantitative', bin: { maxbins: 30 } }, y: { aggregate: 'count', title: 'episodes' } } }],
  ];
  if (cdf.length > 0) charts.push(['Latency per tool (CDF)', { data: { values: cdf }, mark: { type: 'line', interpolate: 'step-after' }, width: 520, height: 220, encoding: { x: { field: 'ms', type: 'quantitative', scale: { type: 'symlog' }, title: 'latency (ms)' }, y: { field: 'share', type: 'quantitative', title: 'share of calls' }, color: { field: 'tool', type: 'nominal', scale: { scheme: 'category20' }, legend: { labelLimit: 320 } } } }]);
  charts.push(['Cost per episode', costs.length > 0 ? { data: { values: costs }, mark: 'bar', width: 420, height: 160, encoding: { x: { field: 'usd', type: 'quantitative', bin: { maxbins: 30 }, title: 'USD' }, y: { aggregate: 'count', title: 'episodes' } } } : 'no priced calls: the cost per episode is drawn for llm: policies and judges, and for tools that declare cost_usd']);
  const drawn = await Promise.all(charts.map(async ([title, spec]) => `<section><h2>${esc(title)}</h2>${typeof spec === 'string' ? `<p>${esc(spec)}</p>` : await svg(spec)}</section>`));
  const failed = report.tasks.filter((t) => t.trials.some((x) => !x.success));
  const rows = [
    ['success', `${pct(m.success_rate.value)} (95% CI ${pct(m.success_rate.ci_low)} – ${pct(m.success_rate.ci_high)})`],
    ['an agent that changes nothing', pct(m.do_nothing_floor)],
    ...Object.entries(m.pass_hat_k).map(([k, v]) => [`pass^${k}`, v.toFixed(3)]),
    ['reward per episode', `${m.reward.value.toFixed(3)} (95% CI ${m.reward.ci_low.toFixed(3)} – ${m.reward.ci_high.toFixed(3)})`],
    ['steps per episode', m.steps_per_episode.value.toFixed(2)],
    ['tool calls succeeded', pct(m.tool_success_rate.value)],
    ['invalid actions', pct(m.invalid_action_rate.value)],
    ['PII leaks', `${pct(m.pii_leak_rate.value)} of episodes`],
    ...(m.cost ? [['cost per episode', m.cost.usd_per_episode === null ? 'price unknown' : `$${m.cost.usd_per_episode.value.toFixed(4)}`]] : []),
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(`${report.suite} · ${report.policy}`)}</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}section{margin:1.5em 0}h1{font-size:1.4em}h2{font-size:1.1em}code{background:#f4f4f4;padding:0 .2em}</style></head>
<body>
<h1>${esc(report.suite)} (${esc(report.split)}) · policy <code>${esc(report.policy)}</code> · ${report.tasks.length} tasks × ${report.trials} trial${report.trials === 1 ? '' : 's'}</h1>
<p>${esc(report.started_at)} · ${(report.duration_ms / 1000).toFixed(1)} s · seed ${report.seed} · run folder <code>${esc(report.run_dir)}</code></p>
<table>${rows.map(([k, v]) => `<tr><th>${esc(k as string)}</th><td>${esc(v as string)}</td></tr>`).join('')}</table>
${report.baseline ? baselineSection(report.baseline) : ''}
${drawn.join('\n')}
<section><h2>Failed tasks (${failed.length})</h2><table><tr><th>task</th><th>trial</th><th>why</th></tr>${failed
    .flatMap((t) =>
      t.trials
        .filter((x) => !x.success)
        .map((x) => `<tr><td>${esc(t.id)}</td><td>${x.trial}</td><td>${esc(x.checks ? [x.checks.state_match ? '' : 'final state differs', x.checks.outputs_missing.length > 0 ? `never said ${x.checks.outputs_missing.join(', ')}` : ''].filter(Boolean).join('; ') : (x.error ?? x.reason))}</td></tr>`),
    )
    .join('')}</table></section>
</body></html>
`;
}

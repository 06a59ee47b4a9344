/** `agent benchmark <suite-dir>`: run a suite's tasks with a policy, score them, and gate on a baseline. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { BaselineComparison, BenchmarkReport, JsonValue, TrialResult } from '../src/internal.js';
import { abortOnSignals } from './interrupt.js';
import type { Io } from './io.js';
import { core, ui } from './lib.js';
import { addLlmOptions, addProgramOptions, integer, llmSettings, OTEL_HELP, positiveInt, programLimits, sandboxWarning, toolOption, addSandboxOption, type LlmFlags, type ProgramFlags, type SandboxFlags } from './options.js';
import { BENCHMARK_DEFAULTS, RUN_DEFAULTS } from '../src/shared/defaults.js';

const FORMATS = ['text', 'json', 'markdown', 'junit', 'github', 'html'] as const;
type Format = (typeof FORMATS)[number];

interface Flags extends LlmFlags, ProgramFlags, SandboxFlags {
  list?: boolean;
  json?: boolean;
  split?: string;
  tasks?: string[];
  policy: string;
  trials: number;
  concurrency: number;
  maxSteps?: number;
  seed: number;
  out: string;
  baseline?: string;
  maxRegression: Record<string, number>;
  format: Format;
  toolOption: Record<string, JsonValue>;
  user?: string;
  judge?: string;
  metric: string[];
  otel?: string;
}

function regression(value: string, previous: Record<string, number>): Record<string, number> {
  const m = /^([a-z_]+)=(\d+(?:\.\d+)?)$/.exec(value);
  if (!m) throw new InvalidArgumentError('expected metric=delta, e.g. success_rate=0.05.');
  return { ...previous, [m[1] as string]: Number(m[2]) };
}

export function registerBenchmark(program: Command, io: Io): void {
  const command = program
    .command('benchmark')
    .description("Run a suite's tasks with a policy, score them (success with confidence intervals, pass^k, tools), and gate on a baseline.")
    .argument('[suite]', 'a suite folder (an env with tasks/<split>.jsonl), or a suite shipped with the toolkit by name (agent benchmark --list): tau-bench/airline, tau2-bench/telecom, …')
    .option('--list', 'list the suites shipped with the toolkit')
    .option('--split <name>', `which task file to run (tasks/<split>.jsonl; default: the suite's default_split, else ${BENCHMARK_DEFAULTS.split})`)
    .option('--tasks <ids>', 'only these task ids (comma-separated)', (v: string) => v.split(',').map((s) => s.trim()).filter(Boolean))
    .option('--policy <policy>', "'gold' (replays each task's gold actions), 'random', llm:<model> (a model with tool calling), cmd:'<command line>' (an agent program, started once per trial with the task in AGENT_TASK), or a policy module", 'random')
    .option('--user <user>', "llm:<model>: a simulated user that is given each task's instruction and talks to an llm: policy (tau-bench's user)")
    .option('--judge <judge>', "llm:<model>: a judge the suite's checks may ask (τ²-bench's natural-language assertions; without one they are reported as not scored), served where --llm-base-url points")
    .option('--trials <k>', 'episodes per task (pass^k is reported for k = 1 … trials)', positiveInt, BENCHMARK_DEFAULTS.trials)
    .option('--concurrency <c>', 'episodes in flight at once', positiveInt, BENCHMARK_DEFAULTS.concurrency)
    .option('--max-steps <m>', 'steps per episode at most (default: 30, or the longest gold sequence + 2)', positiveInt)
    .option('--seed <s>', 'seed for the policy, the tools and the bootstrap', integer, RUN_DEFAULTS.seed)
    .option('--out <dir>', 'parent folder of run folders (the report goes into the run folder as benchmark.json)', RUN_DEFAULTS.out)
    .option('--baseline <file>', 'an earlier benchmark.json: compare paired by task and trial; exit 1 on a significant regression')
    .option('--max-regression <metric=delta>', 'allowed drop before the gate fails (repeatable; default success_rate=0)', regression, {})
    .option('--format <format>', `output: ${FORMATS.join(', ')}`, (v: string) => {
      if (!(FORMATS as readonly string[]).includes(v)) throw new InvalidArgumentError(`expected one of ${FORMATS.join(', ')}.`);
      return v as Format;
    }, 'text')
    .addOption(new Option('--json', 'the report as JSON (the same as --format json: every command takes --json)').implies({ format: 'json' }))
    .option('--tool-option <key=value>', 'option passed to the tools module (repeatable)', toolOption, {})
    .option('--otel <url>', OTEL_HELP)
    .option('--metric <module|url>', 'a metric module, (episode) => number | Record<string, number>, or a metric service URL each episode is POSTed to (token from $AGENT_METRIC_TOKEN); aggregated with a bootstrap interval (repeatable)', (v: string, prev: string[]) => [...prev, v], []);
  addSandboxOption(addProgramOptions(addLlmOptions(command)))
    .addHelpText('after', '\nExamples:\n  agent benchmark fixtures/tau-bench/airline --policy gold\n  agent benchmark fixtures/tau-bench/retail --policy ./my-agent.ts --trials 4 --format markdown\n  agent benchmark fixtures/tau-bench/retail --policy llm:gpt-4o --user llm:gpt-4o --trials 4\n  agent benchmark tau2-bench/retail --policy llm:gpt-4.1 --user llm:gpt-4.1 --judge llm:gpt-4.1\n  agent benchmark fixtures/tau-bench/retail --policy ./my-agent.ts --baseline main/benchmark.json --max-regression success_rate=0.02')
    .action(async (suite: string | undefined, flags: Flags) => {
      if (flags.list) {
        const { listSuites } = await core();
        const suites = await listSuites();
        io.stdout.write(flags.json ? `${JSON.stringify(suites, null, 2)}\n` : `${suites.map((s) => `${s.name.padEnd(20)} ${String(s.tasks).padStart(4)} tasks (${s.split})  ${s.title}`).join('\n')}\n`);
        return;
      }
      if (suite === undefined) {
        io.stderr.write("error: missing required argument 'suite'\n(run with --help for usage; agent benchmark --list names the built-in suites)\n");
        io.exitCode = 2;
        return;
      }
      io.exitCode = await benchmarkCommand(suite, flags, io);
    });
}

async function benchmarkCommand(suite: string, flags: Flags, io: Io): Promise<number> {
  const { runBenchmark, attachPlainReporter, otelConfig, UsageError } = await core();
  const otel = otelConfig(process.env, flags.otel);
  const program = programLimits(flags);
  if (program.misplaced) throw new UsageError(`${program.misplaced} goes with a cmd: policy (got --policy ${flags.policy})`, "Pass --policy cmd:'<command line>', or drop it.");
  // On a terminal, the run's live view (episodes done, calls in flight, errors by tool); else progress lines on stderr.
  const live = io.stderr.isTTY === true && flags.format === 'text' ? (await ui()).renderRunView : undefined;
  const controller = new AbortController();
  const stopListening = abortOnSignals(controller, io, 'interrupted: stopping the benchmark');
  let reporter: { close(): void } | undefined;
  let report: BenchmarkReport;
  try {
    report = await runBenchmark({
      suite,
      split: flags.split,
      ...(flags.tasks ? { tasks: flags.tasks } : {}),
      policy: flags.policy,
      trials: flags.trials,
      concurrency: flags.concurrency,
      ...(flags.maxSteps !== undefined ? { maxSteps: flags.maxSteps } : {}),
      seed: flags.seed,
      out: flags.out,
      toolOptions: flags.toolOption,
      ...(otel ? { otel } : {}),
      ...(flags.user !== undefined ? { user: flags.user } : {}),
      ...(flags.judge !== undefined ? { judge: flags.judge } : {}),
      ...(flags.metric.length > 0 ? { metrics: flags.metric } : {}),
      ...(flags.baseline ? { baseline: { file: flags.baseline, maxRegression: flags.maxRegression } } : {}),
      llm: llmSettings(flags),
      ...(program.limits ? { program: program.limits } : {}),
      ...(flags.sandbox ? { sandbox: flags.sandbox } : {}),
      signal: controller.signal,
      // Progress goes to stderr: stdout is the report.
      onRun: (run, scored) => {
        const unsafe = sandboxWarning(flags, run.definition);
        if (unsafe) io.stderr.write(unsafe);
        const source = {
          config: run.config,
          progress: () => run.progress(),
          events: run.events,
          headline: () => {
            const s = scored();
            return s.done === 0 ? undefined : `success so far ${s.succeeded}/${s.done} (${((s.succeeded / s.done) * 100).toFixed(1)}%)`;
          },
        };
        reporter = live ? live(source, io.stderr as NodeJS.WriteStream, io.stdout) : attachPlainReporter(source, { out: io.stderr, err: io.stderr });
      },
    });
  } finally {
    reporter?.close();
    stopListening();
  }
  const comparison = report.baseline;
  // The page is written beside benchmark.json in any case; --format html prints it too.
  io.stdout.write(flags.format === 'html' ? await readFile(path.join(report.run_dir, 'benchmark.html'), 'utf8') : render(report, comparison, flags.format));
  return comparison?.regressed ? 1 : 0;
}

const pct = (n: number): string => `${(n * 100).toFixed(1)}%`;
const signed = (n: number): string => `${n >= 0 ? '+' : ''}${n.toFixed(3)}`;

/** Why a trial failed, in a few words: what its check found wrong, else how the episode ended. */
function whyFailed(x: TrialResult): string {
  if (x.checks) return [x.checks.state_match ? '' : 'final state differs', x.checks.outputs_missing.length > 0 ? `never said ${x.checks.outputs_missing.map((o) => `"${o}"`).join(', ')}` : ''].filter(Boolean).join('; ');
  const failing = Object.entries(x.components ?? {}).filter(([, v]) => v < 1).map(([k, v]) => `${k} ${v}`);
  const raised = typeof x.details?.['error'] === 'string' ? x.details['error'] : undefined;
  if (failing.length > 0 || raised) return [...failing, ...(raised ? [raised] : [])].join(', ');
  return x.error ?? x.reason;
}

function successCount(r: BenchmarkReport): string {
  const all = r.tasks.flatMap((t) => t.trials);
  return `${all.filter((x) => x.success).length}/${all.length}`;
}

function render(r: BenchmarkReport, c: BaselineComparison | undefined, format: Format): string {
  switch (format) {
    case 'html':
    case 'json':
      return `${JSON.stringify(r, null, 2)}\n`;
    case 'markdown':
      return markdown(r, c);
    case 'junit':
      return junit(r);
    case 'github':
      return github(r, c);
    default:
      return text(r, c);
  }
}

/**
 * A module check's components (τ²'s DB, ENV_ASSERTION, …): how many of the trials scored on each
 * passed it; those it could not score (NL assertions without --judge), left out of success, with
 * how many tasks they concern; and the judge's cost.
 */
function componentLines(r: BenchmarkReport): string[] {
  const passed = new Map<string, { ok: number; of: number }>();
  const tasks = new Map<string, Set<string>>();
  for (const t of r.tasks) {
    for (const x of t.trials) {
      for (const [c, v] of Object.entries(x.components ?? {})) {
        const n = passed.get(c) ?? { ok: 0, of: 0 };
        passed.set(c, { ok: n.ok + (v === 1 ? 1 : 0), of: n.of + 1 });
      }
      for (const c of x.not_scored ?? []) tasks.set(c, (tasks.get(c) ?? new Set<string>()).add(t.id));
    }
  }
  const lines = passed.size > 0 ? [`  components     ${[...passed].map(([c, n]) => `${c} ${n.ok}/${n.of}`).join(', ')} trials passed`] : [];
  lines.push(...[...tasks].map(([c, ids]) => `  not scored     ${c} in ${ids.size} of ${r.tasks.length} tasks (left out of success${c === 'NL_ASSERTION' && !r.judge ? '; --judge llm:<model> scores it' : ''})`));
  if (r.judge) lines.push(`  judge          ${r.judge.model}: ${r.judge.calls} calls, ${r.judge.input_tokens + r.judge.output_tokens} tokens`);
  return lines;
}

function text(r: BenchmarkReport, c: BaselineComparison | undefined): string {
  const m = r.metrics;
  const lines = [
    `benchmark ${r.suite} (${r.split}), policy ${r.policy}: ${r.tasks.length} tasks × ${r.trials} trial${r.trials === 1 ? '' : 's'} in ${(r.duration_ms / 1000).toFixed(1)} s`,
    `  success        ${successCount(r)} = ${pct(m.success_rate.value)}  (95% CI ${pct(m.success_rate.ci_low)} – ${pct(m.success_rate.ci_high)}; an agent that changes nothing scores ${pct(m.do_nothing_floor)})`,
    ...componentLines(r),
    `  pass^k         ${Object.entries(m.pass_hat_k).map(([k, v]) => `k=${k}: ${v.toFixed(3)}`).join('  ')}`,
    `  reward         ${m.reward.value.toFixed(3)} per episode (95% CI ${m.reward.ci_low.toFixed(3)} – ${m.reward.ci_high.toFixed(3)})`,
    `  steps          ${m.steps_per_episode.value.toFixed(2)} per episode`,
    `  tool calls     ${pct(m.tool_success_rate.value)} succeeded; invalid actions ${pct(m.invalid_action_rate.value)}`,
    ...(m.cost ? [`  cost           ${m.cost.usd_per_episode === null ? 'price unknown' : `$${m.cost.usd_per_episode.value.toFixed(4)}`} and ${Math.round(m.cost.tokens_per_episode.value)} tokens per episode`] : []),
    `  PII leaks      ${pct(m.pii_leak_rate.value)} of episodes`,
    ...Object.entries(m.custom ?? {}).map(([name, v]) => `  ${name.padEnd(14)} ${v.value} (95% CI ${v.ci_low} – ${v.ci_high})`),
  ];
  const leaks = r.tasks.flatMap((t) => t.trials.flatMap((x) => (x.pii ?? []).map((p) => `${t.id}#${x.trial} ${p.trace_id} ${p.where}: ${p.kind} "${p.value}"${p.belongs_to ? ` (of ${p.belongs_to})` : ''}`)));
  for (const l of leaks.slice(0, 5)) lines.push(`    ${l}`);
  for (const [name, t] of Object.entries(m.tools)) lines.push(`    ${name.padEnd(32)} ${String(t.calls).padStart(5)} calls, ${pct(t.success_rate).padStart(6)} ok, p50 ${t.latency_ms.p50} ms, p95 ${t.latency_ms.p95} ms, p99 ${t.latency_ms.p99} ms`);
  const failed = r.tasks.filter((t) => t.trials.some((x) => !x.success));
  if (failed.length > 0) {
    lines.push(`  failed tasks (${failed.length}):`);
    for (const t of failed.slice(0, 10)) {
      const x = t.trials.find((y) => !y.success);
      lines.push(`    ${t.id}: ${x ? whyFailed(x) : ''}`);
    }
    if (failed.length > 10) lines.push(`    … and ${failed.length - 10} more (benchmark.json has them all)`);
  }
  if (c) {
    lines.push(`against ${c.baseline}:`);
    for (const x of c.metrics) lines.push(`  ${x.metric.padEnd(18)} ${x.current.toFixed(3)} vs ${x.baseline.toFixed(3)}: ${signed(x.difference.value)} (95% CI ${signed(x.difference.ci_low)} … ${signed(x.difference.ci_high)}, ${x.difference.pairs} pairs)${x.regression ? `  REGRESSION (allowed ${x.allowed})` : ''}`);
    lines.push(`  win rate           ${c.win_rate.value.toFixed(3)} (95% CI ${c.win_rate.ci_low.toFixed(3)} – ${c.win_rate.ci_high.toFixed(3)}): ${c.win_rate.wins} wins, ${c.win_rate.losses} losses, ${c.win_rate.ties} ties`);
    if (c.flipped.length > 0) lines.push(`  flipped: ${c.flipped.map((f) => `${f.id}#${f.trial} ${f.before ? 'pass→fail' : 'fail→pass'}`).join(', ')}`);
    lines.push(c.regressed ? 'gate: FAILED' : 'gate: passed');
  }
  lines.push(`run folder: ${r.run_dir} (benchmark.json, benchmark.html)`);
  return `${lines.join('\n')}\n`;
}

function markdown(r: BenchmarkReport, c: BaselineComparison | undefined): string {
  const m = r.metrics;
  const out = [
    `### Benchmark: ${r.suite} (${r.split}), policy \`${r.policy}\``,
    '',
    '| metric | value | 95% CI |',
    '|---|---|---|',
    `| success | ${successCount(r)} = ${pct(m.success_rate.value)} | ${pct(m.success_rate.ci_low)} – ${pct(m.success_rate.ci_high)} |`,
    ...Object.entries(m.pass_hat_k).map(([k, v]) => `| pass^${k} | ${v.toFixed(3)} | |`),
    `| reward per episode | ${m.reward.value.toFixed(3)} | ${m.reward.ci_low.toFixed(3)} – ${m.reward.ci_high.toFixed(3)} |`,
    `| steps per episode | ${m.steps_per_episode.value.toFixed(2)} | ${m.steps_per_episode.ci_low.toFixed(2)} – ${m.steps_per_episode.ci_high.toFixed(2)} |`,
    `| tool calls succeeded | ${pct(m.tool_success_rate.value)} | ${pct(m.tool_success_rate.ci_low)} – ${pct(m.tool_success_rate.ci_high)} |`,
    `| invalid actions | ${pct(m.invalid_action_rate.value)} | ${pct(m.invalid_action_rate.ci_low)} – ${pct(m.invalid_action_rate.ci_high)} |`,
    `| PII leaks | ${pct(m.pii_leak_rate.value)} of episodes | ${pct(m.pii_leak_rate.ci_low)} – ${pct(m.pii_leak_rate.ci_high)} |`,
  ];
  if (c) {
    out.push('', `**Against the baseline:** ${c.regressed ? '❌ regression' : '✅ no significant regression'}`, '', '| metric | now | baseline | difference (95% CI) |', '|---|---|---|---|');
    out.push(`| win rate | ${c.win_rate.value.toFixed(3)} | | ${c.win_rate.wins} wins, ${c.win_rate.losses} losses, ${c.win_rate.ties} ties |`);
    for (const x of c.metrics) out.push(`| ${x.metric} | ${x.current.toFixed(3)} | ${x.baseline.toFixed(3)} | ${signed(x.difference.value)} (${signed(x.difference.ci_low)} … ${signed(x.difference.ci_high)})${x.regression ? ' ❌' : ''} |`);
    const lost = c.flipped.filter((f) => f.before && !f.now);
    const won = c.flipped.filter((f) => !f.before && f.now);
    if (lost.length > 0) out.push('', `Tasks that now fail: ${lost.map((f) => `\`${f.id}\``).join(', ')}`);
    if (won.length > 0) out.push('', `Tasks that now pass: ${won.map((f) => `\`${f.id}\``).join(', ')}`);
  }
  return `${out.join('\n')}\n`;
}

const xml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function junit(r: BenchmarkReport): string {
  const failures = r.tasks.filter((t) => t.trials.some((x) => !x.success)).length;
  const cases = r.tasks.map((t) => {
    const bad = t.trials.filter((x) => !x.success);
    const body = bad.length === 0 ? '' : `<failure message="${xml(`${bad.length} of ${t.trials.length} trials failed`)}">${xml(bad.map((x) => `trial ${x.trial}: ${x.checks ? `state_match=${x.checks.state_match}, outputs missing: ${x.checks.outputs_missing.join(', ') || 'none'}` : (x.error ?? x.reason)}`).join('\n'))}</failure>`;
    return `  <testcase classname="${xml(`${r.suite}.${r.split}`)}" name="${xml(t.id)}">${body}</testcase>`;
  });
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="${xml(`${r.suite} ${r.split} (${r.policy})`)}" tests="${r.tasks.length}" failures="${failures}" time="${(r.duration_ms / 1000).toFixed(3)}">\n${cases.join('\n')}\n</testsuite>\n`;
}

function github(r: BenchmarkReport, c: BaselineComparison | undefined): string {
  const lines = [`::notice title=benchmark ${r.suite}::success ${successCount(r)} = ${pct(r.metrics.success_rate.value)} (95% CI ${pct(r.metrics.success_rate.ci_low)} – ${pct(r.metrics.success_rate.ci_high)})`];
  if (c) {
    for (const f of c.flipped) lines.push(`::${f.before ? 'error' : 'notice'} title=${f.before ? 'task now fails' : 'task now passes'}::${f.id} (trial ${f.trial})`);
    for (const x of c.metrics.filter((m) => m.regression)) lines.push(`::error title=regression in ${x.metric}::${x.current.toFixed(3)} vs ${x.baseline.toFixed(3)} (${signed(x.difference.value)}, 95% CI ${signed(x.difference.ci_low)} … ${signed(x.difference.ci_high)}; allowed ${x.allowed})`);
  }
  return `${lines.join('\n')}\n`;
}

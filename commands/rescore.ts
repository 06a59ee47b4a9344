/**
 * `agent rescore <run-dir>`: a finished run's rewards computed again, by its env's reward sources
 * as they are now or with an evaluator or judge model replaced, into a new version of its reward
 * log; the policy and the tools do not run again.
 */
import path from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { RescoreReport } from '../src/internal.js';
import type { Io } from './io.js';
import { core } from './lib.js';

interface RescoreFlags {
  source?: string[];
  evaluator?: string[];
  judge?: string;
  llmBaseUrl?: string;
  json?: boolean;
}

const collect = (v: string, all: string[] = []): string[] => [...all, v];

/** `<source>=<module>[#<function>]`: the function defaults to the source's name, as in env.json. */
function evaluatorOf(spec: string): [string, { module: string; exportName: string }] {
  const m = /^([^=]+)=([^#]+)(?:#(.+))?$/.exec(spec);
  if (!m) throw new InvalidArgumentError(`--evaluator ${spec}: expected <source>=<module>[#<function>], e.g. judge=./strict-judge.ts#judge.`);
  const [, source, module, fn] = m as unknown as [string, string, string, string | undefined];
  return [source, { module: path.resolve(module), exportName: fn ?? source }];
}

export function registerRescore(program: Command, io: Io): void {
  program
    .command('rescore')
    .description("Compute a finished run's rewards again (its env's reward sources as they are now, or with an evaluator or judge replaced) without running the policy or the tools: a new version of its reward log, the old kept; agent export --reward-version N counts it.")
    .argument('<run-dir>', 'a finished run folder')
    .option('--source <name>', 'a reward source to compute again (repeatable; default: every source that computes its value: a module, a judge, a service)', collect)
    .option('--evaluator <source=module#fn>', "a module's function in place of the source's own (repeatable): it gets the step as the source did (action, params, observation, state_before, state_after)", collect)
    .option('--judge <judge>', "llm:<model>: every LLM-judge source asks this model instead, its prompt kept (served where --llm-base-url points, when given)")
    .option('--llm-base-url <url>', 'with --judge: the OpenAI-compatible server the judge model is served by')
    .option('--json', 'print the report as JSON')
    .addHelpText('after', '\nExamples:\n  agent rescore runs/20261130-101500-1a2b3c\n  agent rescore runs/20261130-101500-1a2b3c --evaluator judge=./strict-judge.ts#judge\n  agent rescore runs/20261130-101500-1a2b3c --judge llm:gpt-4.1\n  agent export runs/20261130-101500-1a2b3c --reward-version 2 > steps.jsonl')
    .action(async (dir: string, flags: RescoreFlags) => {
      if (flags.judge !== undefined && !flags.judge.startsWith('llm:')) throw new InvalidArgumentError(`--judge ${flags.judge}: expected llm:<model>.`);
      if (flags.llmBaseUrl !== undefined && flags.judge === undefined) throw new InvalidArgumentError('--llm-base-url goes with --judge llm:<model>.');
      const { rescoreRun } = await core();
      const controller = new AbortController();
      const stop = (): void => controller.abort(new Error('interrupted'));
      process.once('SIGINT', stop);
      let values = 0;
      // A long rescore (an LLM judge over thousands of steps) says every few seconds that it is moving.
      const ticker = flags.json ? undefined : setInterval(() => io.stderr.write(`rescoring: ${values} values so far\n`), 5_000);
      ticker?.unref();
      try {
        const report = await rescoreRun(dir, {
          ...(flags.source ? { sources: flags.source } : {}),
          ...(flags.evaluator ? { evaluators: Object.fromEntries(flags.evaluator.map(evaluatorOf)) } : {}),
          ...(flags.judge !== undefined ? { judge: { model: flags.judge.slice('llm:'.length), ...(flags.llmBaseUrl !== undefined ? { baseURL: flags.llmBaseUrl } : {}) } } : {}),
          signal: controller.signal,
          onProgress: (n) => (values = n),
        });
        io.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : reportText(report));
      } finally {
        clearInterval(ticker);
        process.off('SIGINT', stop);
      }
    });
}

function reportText(r: RescoreReport): string {
  const lines = [
    `rescored ${r.sources.join(', ')}: ${r.evaluations.arrived} values, ${r.evaluations.failed} failed; reward log version ${r.version} (${path.basename(r.file)}), the run's own kept`,
    `${r.changed.length} of ${r.episodes} episodes changed return`,
    ...r.changed.slice(0, 20).map((c) => `  episode ${c.episode}: ${c.before} → ${c.after}`),
    ...(r.changed.length > 20 ? [`  … and ${r.changed.length - 20} more (--json lists them all)`] : []),
    `export it: agent export ${r.run_dir} --reward-version ${r.version}`,
  ];
  return `${lines.join('\n')}\n`;
}

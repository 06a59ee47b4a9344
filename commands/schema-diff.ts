/** `agent schema-diff`: direction-aware breaking-change detection for env schemas. */
import { Option, type Command } from 'commander';
import type { DiffKind, DiffMode, DiffReport, Severity } from '../src/internal.js';
import type { Io } from './io.js';
import { core } from './lib.js';

type Lib = Awaited<ReturnType<typeof core>>;
type Format = 'text' | 'json' | 'markdown' | 'github' | 'sarif';

/** One renderer per --format. */
const RENDERERS: Record<Format, (report: DiffReport, lib: Lib, tty: boolean) => string | Promise<string>> = {
  json: (report) => `${JSON.stringify(report, null, 2)}\n`,
  markdown: (report, lib) => lib.renderMarkdown(report),
  github: (report, lib) => lib.renderGithub(report),
  sarif: (report, lib) => lib.renderSarif(report, lib.RULE_SUMMARIES),
  text: async (report, lib, tty) => {
    // NO_COLOR (https://no-color.org): any non-empty value turns colour off.
    if (!tty || process.env['NO_COLOR']) return lib.renderText(report);
    const { Chalk, default: detected } = await import('chalk');
    // On a terminal, colour even where chalk's own sniffing of this process's stdout says none (io may not be process.stdout).
    const chalk = new Chalk({ level: Math.max(1, detected.level) as 1 | 2 | 3 });
    return lib.renderText(report, (s, text) => (s === 'breaking' ? chalk.red.bold(text) : s === 'warning' ? chalk.yellow(text) : chalk.dim(text)));
  },
};

interface Flags {
  kind?: DiffKind;
  mode: DiffMode;
  format: Format;
  failOn: Severity;
  ignore?: string;
  tolerant?: boolean;
  base?: string;
}

export function registerSchemaDiff(program: Command, io: Io): void {
  program
    .command('schema-diff')
    .description('Find breaking changes between two versions of an env\'s schemas, each proven by a witness value.')
    .argument('<old>', 'old env folder or schema file (with --base: the env folder to check)')
    .argument('[new]', 'new env folder or schema file')
    .addOption(new Option('--kind <kind>', 'kind of the schema files (inferred from their names otherwise)').choices(['state', 'action', 'reward']))
    .addOption(new Option('--mode <mode>', 'default: actions backward, state and rewards forward; or force one direction, or both').choices(['default', 'backward', 'forward', 'full']).default('default'))
    .addOption(new Option('--format <format>', 'output format').choices(['text', 'json', 'markdown', 'github', 'sarif']).default('text'))
    .addOption(new Option('--json', 'the report as JSON (the same as --format json: every command takes --json)').implies({ format: 'json' }))
    .addOption(new Option('--fail-on <severity>', 'exit 1 when a finding at or above this severity remains').choices(['breaking', 'warning', 'info']).default('breaking'))
    .option('--ignore <file>', 'ignore file: `<rule-id> <location> <until|-> <reason>` per line')
    .option('--tolerant', 'consumers ignore undeclared keys (oasdiff-style); default is strict set semantics')
    .option('--base <git-rev>', 'compare the env folder <old> with itself at a git revision')
    .addHelpText('after', '\nExamples:\n  agent schema-diff envs/airline-v1 envs/airline-v2\n  agent schema-diff fixtures/weather --base origin/main --format github\n  agent schema-diff old/state_schema.json new/state_schema.json --format json')
    .action(async (first: string, second: string | undefined, flags: Flags) => {
      const lib = await core();
      const { UsageError } = lib;
      if (flags.base === undefined && second === undefined) throw new UsageError('schema-diff needs <old> and <new>, or <env-dir> --base <git-rev>', 'Run agent schema-diff --help for examples.');
      if (flags.base !== undefined && second !== undefined) throw new UsageError('with --base, pass one env folder (it is compared with itself at that revision)');
      const report = await lib.schemaDiff({
        ...(flags.base !== undefined ? { new: first, base: flags.base } : { old: first, new: second as string }),
        mode: flags.mode,
        failOn: flags.failOn,
        ...(flags.kind ? { kind: flags.kind } : {}),
        ...(flags.tolerant ? { tolerant: true } : {}),
        ...(flags.ignore ? { ignoreFile: flags.ignore } : {}),
      });
      io.stdout.write(await RENDERERS[flags.format](report, lib, io.stdout.isTTY === true));
      io.exitCode = report.compatible ? 0 : 1;
    });
}

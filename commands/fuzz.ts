/** `agent fuzz`: schema-driven fuzzing of an env's tools, or value generation from one schema. */
import { readFile } from 'node:fs/promises';
import { Option, type Command } from 'commander';
import type { CheckName, FuzzCase, Fuzzer, JsonSchema, JsonValue } from '../src/internal.js';
import { core, ui } from './lib.js';
import { abortOnSignals } from './interrupt.js';
import type { Io } from './io.js';
import { duration, ratio, toolOption, wholeNumber } from './options.js';

interface Flags {
  runs: number;
  seed: number;
  actions?: string[];
  timeBudget?: number;
  invalidRatio: number;
  json?: boolean;
  replay?: string;
  skip: CheckName[];
  toolTimeout: number;
  toolOption: Record<string, JsonValue>;
  store: string;
  schema?: string;
  generate?: number;
  invalid?: boolean;
  listChecks?: boolean;
}

export function registerFuzz(program: Command, io: Io): void {
  program
    .command('fuzz')
    .description('Fuzz an environment from its schemas: valid, boundary and invalid calls in many states; failures shrunk and saved for replay.')
    .argument('[env-dir]', 'environment folder')
    .option('--runs <n>', 'cases to run', wholeNumber, 500)
    .option('--seed <s>', 'seed: the same seed runs the same cases', wholeNumber, 0)
    .option('--actions <list>', 'only these actions (comma-separated)', (v: string) => v.split(',').map((s) => s.trim()).filter(Boolean))
    .option('--time-budget <duration>', 'stop starting cases after this long (60s, 2m, 500ms)', duration)
    .option('--invalid-ratio <r>', 'share of enabled cases with invalid params', ratio, 0.3)
    .addOption(new Option('--skip <check>', 'turn a check off (repeatable; `agent fuzz --list-checks` lists them)').argParser((v: string, prev: CheckName[] = []) => [...prev, v as CheckName]).default([]))
    .option('--list-checks', 'list the checks with what each one asserts, and exit')
    .option('--tool-timeout <ms>', 'cap on every tool timeout while fuzzing', wholeNumber, 2_000)
    .option('--tool-option <key=value>', 'option passed to the tools module (repeatable)', toolOption, {})
    .option('--store <dir>', 'where failing cases are kept and replayed from', '.agent-fuzz')
    .option('--replay <case>', 'run one saved case (a file under .agent-fuzz) and report it')
    .option('--json', 'JSON lines for CI: started, fixed, failure and done events')
    .option('--schema <file>', 'generate values from this JSON Schema instead of fuzzing an env')
    .option('--generate <n>', 'with --schema: how many values', wholeNumber)
    .option('--invalid', 'with --schema: generate invalid values (each breaks one rule)')
    .addHelpText('after', '\nExamples:\n  agent fuzz fixtures/airline --runs 2000 --seed 7\n  agent fuzz fixtures/buggy --replay .agent-fuzz/buggy/no-crash_book_seats_TOOL_CRASHED.json\n  agent fuzz --schema fixtures/weather/state_schema.json --generate 5 --invalid')
    .action(async (envDir: string | undefined, flags: Flags) => {
      const { CHECKS, CHECK_DESCRIPTIONS, UsageError } = await core();
      if (flags.listChecks) {
        for (const c of CHECKS) io.stdout.write(`${c.padEnd(16)} ${CHECK_DESCRIPTIONS[c]}\n`);
        return;
      }
      const unknown = flags.skip.filter((c) => !CHECKS.includes(c));
      if (unknown.length > 0) throw new UsageError(`--skip: unknown check '${unknown[0]}'`, `The checks are: ${CHECKS.join(', ')}.`);
      if (flags.schema !== undefined) {
        io.exitCode = await generateCommand(flags, io);
        return;
      }
      if (!envDir) throw new UsageError('agent fuzz needs an env folder, or --schema FILE --generate N', 'Run agent fuzz --help for examples.');
      io.exitCode = await fuzzCommand(envDir, flags, io);
    });
}

async function generateCommand(flags: Flags, io: Io): Promise<number> {
  const { generateSamples, UsageError } = await core();
  if (flags.generate === undefined) throw new UsageError('--schema needs --generate N', 'Example: agent fuzz --schema state.json --generate 10');
  let schema: JsonSchema;
  try {
    schema = JSON.parse(await readFile(flags.schema as string, 'utf8')) as JsonSchema;
  } catch (err) {
    throw new UsageError(`cannot read JSON Schema '${flags.schema}': ${(err as Error).message}`);
  }
  const { samples, misses } = generateSamples(schema, flags.generate, { ...(flags.invalid ? { invalid: true } : {}), seed: flags.seed });
  for (const s of samples) io.stdout.write(`${JSON.stringify(s)}\n`);
  // An empty answer is a failure, not a success with nothing in it: whatever reads these values would test nothing.
  if (samples.length === 0 && flags.generate > 0) {
    io.stderr.write(`error: no ${flags.invalid ? 'invalid ' : ''}value generated from ${flags.schema as string}: ${misses} draws, each rejected by the schema${flags.invalid ? ' or with no way to break it' : ''}\nhint: The schema may still be satisfiable: the generator cannot build a value for it (combine fewer keywords, e.g. unevaluatedProperties with allOf), or hand-write the values.\n`);
    return 1;
  }
  if (samples.length < flags.generate) io.stderr.write(`warning: generated ${samples.length} of ${flags.generate} values (${misses} generator misses)\n`);
  return 0;
}

async function fuzzCommand(envDir: string, flags: Flags, io: Io): Promise<number> {
  const { CHECKS, Fuzzer, fuzzReport } = await core();
  await using fuzzer = await Fuzzer.prepare({
    env: envDir,
    runs: flags.replay ? 0 : flags.runs,
    seed: flags.seed,
    ...(flags.actions ? { actions: flags.actions } : {}),
    ...(flags.timeBudget !== undefined ? { timeBudgetMs: flags.timeBudget } : {}),
    invalidRatio: flags.invalidRatio,
    checks: CHECKS.filter((c) => !flags.skip.includes(c)),
    toolTimeoutMs: flags.toolTimeout,
    toolOptions: flags.toolOption,
    storeDir: flags.store,
    ...(flags.replay ? { replaySaved: false } : {}),
  });
  // `return await`: the fuzzer is disposed when this scope ends, so the replay must finish inside it.
  if (flags.replay) return await replayCommand(fuzzer, flags.replay, io);

  const controller = new AbortController();
  const stopListening = abortOnSignals(controller, io, 'interrupted: finishing the current case, then shrinking and saving what failed');
  // Progress on stderr (the live view when it is a terminal), the report on stdout.
  const tty = io.stderr.isTTY === true && !flags.json;
  const view = tty ? (await ui()).renderFuzzView(fuzzer, io.stderr as NodeJS.WriteStream) : undefined;
  const off = flags.json
    ? fuzzer.events.onAny((e) => {
        if (e.type !== 'case') io.stdout.write(`${JSON.stringify(e)}\n`);
      })
    : fuzzer.events.onAny((e) => {
        if (!tty && e.type === 'started') io.stderr.write(`fuzzing ${e.env}: ${e.runs} cases, seed ${e.seed}${e.saved > 0 ? `, replaying ${e.saved} saved case${e.saved === 1 ? '' : 's'} first` : ''}\n`);
      });
  try {
    const summary = await fuzzer.run(controller.signal);
    view?.close();
    if (!flags.json) io.stdout.write(fuzzReport(summary, envDir));
    if (summary.interrupted) return 130;
    // A run that ran no case tested nothing: it does not pass.
    return summary.failures.length > 0 || summary.cases === 0 ? 1 : 0;
  } finally {
    off();
    stopListening();
  }
}

async function replayCommand(fuzzer: Fuzzer, spec: string, io: Io): Promise<number> {
  const { UsageError } = await core();
  let c: FuzzCase;
  try {
    const saved = JSON.parse(await readFile(spec, 'utf8')) as { case?: FuzzCase };
    c = saved.case ?? (saved as FuzzCase);
  } catch (err) {
    throw new UsageError(`cannot read case '${spec}': ${(err as Error).message}`, 'Pass a file written under .agent-fuzz by an earlier run.');
  }
  const failure = await fuzzer.replay(c);
  io.stdout.write(`case ${c.id}: ${c.action} ${JSON.stringify(c.params)}\n`);
  if (!failure) {
    io.stdout.write('passes now\n');
    return 0;
  }
  io.stdout.write(`fails: ${failure.check} ${failure.code}\n  ${failure.message}\n`);
  return 1;
}

/**
 * `agent export <run-dir>`: the run as trainer input: one record per step (JSON lines or Parquet),
 * or per episode as a chat (`--format chat`, `chat-parquet`) or as the token sequence a token-mode
 * run generated (`--format tokens`: Parquet, or JSON lines with `--out *.jsonl`); `agent export <suite> --format verl`:
 * a suite's tasks as a verl RL dataset.
 */
import { once } from 'node:events';
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { Io } from './io.js';
import { core } from './lib.js';

const FORMATS = ['jsonl', 'parquet', 'chat', 'chat-parquet', 'tokens', 'verl'] as const;
type Format = (typeof FORMATS)[number];
/** Where each Parquet format goes without --out, and what its records are called. */
const PARQUET: Partial<Record<Format, { file: string; unit: string }>> = {
  parquet: { file: 'export.parquet', unit: 'steps' },
  'chat-parquet': { file: 'chat.parquet', unit: 'episodes' },
  tokens: { file: 'tokens.parquet', unit: 'episodes' },
  verl: { file: 'verl.parquet', unit: 'tasks' },
};

interface Flags {
  format: Format;
  out?: string;
  rewards: 'final' | 'arrived';
  rewardVersion?: number;
  gamma: number;
  state: 'patch' | 'full' | 'none';
  lenient?: boolean;
  split?: string;
  verdict?: string;
  userTurns: 'as-run' | 'said';
}

/** Resolves when the stream can take more, or is gone (an error, a close): never rejects. */
function drainOrGone(out: NodeJS.WritableStream): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      for (const e of ['drain', 'close', 'error']) out.off(e, done);
      resolve();
    };
    for (const e of ['drain', 'close', 'error']) out.on(e, done);
  });
}

/**
 * Opens `--out` for writing, its folder made if missing (`--out runs/sft.parquet` on a fresh
 * checkout). A path no file can be written at is refused naming it, before anything is written.
 */
async function openOut(file: string, refuse: (message: string) => Error): Promise<FileHandle> {
  try {
    await mkdir(path.dirname(path.resolve(file)), { recursive: true });
    return await open(file, 'w');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'EISDIR' ? 'it is a folder' : code === 'ENOTDIR' || code === 'EEXIST' ? 'a part of its path is a file' : code === 'EACCES' || code === 'EPERM' ? 'no permission' : (code ?? String(err));
    throw refuse(`cannot write --out ${file}: ${why}`);
  }
}

function choice<T extends string>(options: readonly T[]): (v: string) => T {
  return (v) => {
    if (!(options as readonly string[]).includes(v)) throw new InvalidArgumentError(`expected one of ${options.join(', ')}.`);
    return v as T;
  };
}

function gamma(v: string): number {
  const n = Number(v);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError('expected a discount between 0 and 1.');
  return n;
}

export function registerExport(program: Command, io: Io): void {
  program
    .command('export')
    .description('Turn a run folder into trainer input: per step the observation the policy saw, action, params, rewards per source, reward, terminated/truncated, returns-to-go.')
    .argument('<run-dir>', 'a run folder written by agent run (with --format verl: a suite, by folder or name, or a benchmark run folder)')
    .option('--format <format>', 'jsonl or parquet (a record per step); chat or chat-parquet (a record per episode: OpenAI chat messages with tool calls, as TRL and OpenAI fine-tuning read them); tokens (a token-mode run: per episode input_ids, loss_mask, logprobs and turns, as verl and TRL train on them; Parquet, or JSON lines when --out ends in .jsonl); verl (a suite\'s tasks as a verl RL dataset, Parquet)', choice(FORMATS), 'jsonl')
    .option('--out <file>', 'where to write (default: stdout for jsonl and chat; <run-dir>/export.parquet, chat.parquet, tokens.parquet or verl.parquet for the Parquet formats)')
    .option('--split <split>', 'with --format verl: the suite\'s task split (default: test, or the benchmark run\'s)')
    .option('--verdict <name>', 'a benchmark run: which verdict is each episode\'s final reward, success (default, 1 or 0) or one of its --metric names (its value)')
    .option('--rewards <basis>', "final (imputed values count, as the deadlines promised) or arrived (only what really arrived, late included)", choice(['final', 'arrived'] as const), 'final')
    .option('--reward-version <n>', "which reward log to count: 1 (default) the run's own, N one agent rescore wrote", (v: string) => {
      if (!/^[1-9]\d*$/.test(v)) throw new InvalidArgumentError('expected a whole number ≥ 1.');
      return Number(v);
    })
    .option('--gamma <g>', 'discount of returns-to-go', gamma, 1)
    .option('--state <mode>', "what each step holds of the state: patch (the seq it was chosen on and the patch the step committed), full (the whole state, on every step), none (the seq)", choice(['patch', 'full', 'none'] as const), 'patch')
    .option('--user-turns <which>', "with --format chat or chat-parquet: as-run (every episode, each marked by user_turns) or said (only episodes whose user turns are what a user said: leaves out a gold run's τ-bench episodes, whose user message would be the simulated user's private scenario)", choice(['as-run', 'said'] as const), 'as-run')
    .option('--lenient', 'skip records that are damaged (not JSON, wrong types, a step twice), counting them, instead of refusing the folder')
    .addHelpText('after', '\nExamples:\n  agent export runs/20261130-101500-1a2b3c > steps.jsonl\n  agent export runs/20261130-101500-1a2b3c --format parquet --out steps.parquet --rewards arrived\n  agent export runs/20261130-101500-1a2b3c --state full > steps-with-states.jsonl\n  agent export runs/20261130-101500-1a2b3c --format chat > episodes.chat.jsonl\n  agent export runs/20261130-101500-1a2b3c --format chat-parquet --out sft.parquet\n  agent export runs/20261130-101500-1a2b3c --format chat --verdict judge > judged.chat.jsonl\n  agent export runs/20261130-101500-1a2b3c --format tokens --out rollouts.parquet\n  agent export tau-bench/airline --format verl --out airline.verl.parquet')
    .action(async (dir: string, flags: Flags) => {
      const { exportChat, exportRun, exportTokens, UsageError, verlDataset, writeChatParquet, writeParquet, writeTokensParquet, writeVerlParquet } = await core();
      if (flags.split !== undefined && flags.format !== 'verl') throw new UsageError('--split goes with --format verl (a suite\'s tasks); a run folder exports the episodes it holds', 'Drop --split, or add --format verl.');
      if (flags.userTurns === 'said' && flags.format !== 'chat' && flags.format !== 'chat-parquet') throw new UsageError('--user-turns goes with --format chat or chat-parquet', 'Drop --user-turns, or add --format chat.');
      if (flags.verdict !== undefined && flags.format === 'verl') throw new UsageError('--verdict goes with a benchmark run\'s episodes; --format verl exports a suite\'s tasks, which have no verdicts yet', 'Drop --verdict.');
      const common = {
        rewards: flags.rewards,
        ...(flags.rewardVersion !== undefined ? { rewardVersion: flags.rewardVersion } : {}),
        ...(flags.verdict !== undefined ? { verdict: flags.verdict } : {}),
        lenient: flags.lenient === true,
        onSkipped: (s: { records: number; first?: string }) => void io.stderr.write(`warning: skipped ${s.records} bad record${s.records === 1 ? '' : 's'}${s.first !== undefined ? ` (first: ${s.first})` : ''}\n`),
        onReplaced: (r: { strings: number; first?: string }) =>
          void io.stderr.write(`warning: ${r.strings} string${r.strings === 1 ? '' : 's'} held a lone surrogate (half of a UTF-16 pair, which UTF-8 cannot encode): exported with U+FFFD in its place${r.first !== undefined ? ` (first: ${r.first})` : ''}\n`),
      };
      const chatOptions = { ...common, userTurns: flags.userTurns, onLeftOut: (n: number, why: string) => void io.stderr.write(`${n} episode${n === 1 ? '' : 's'} left out (--user-turns said): ${why}\n`) };
      const refuse = (message: string): Error => new UsageError(message, 'Pass --out a file path you can write to (missing folders are made).');
      const tokensAsLines = flags.format === 'tokens' && flags.out?.endsWith('.jsonl') === true;
      const parquet = tokensAsLines ? undefined : PARQUET[flags.format];
      if (parquet) {
        // A suite's name (tau-bench/airline) is not a folder to write into: verl's file defaults to here.
        const file = flags.out ?? (flags.format === 'verl' ? parquet.file : path.join(dir, parquet.file));
        // Once the input has been read and checked (bad input writes nothing): --out checked, its folder made; the Parquet writer writes the file itself.
        const ready = async (): Promise<void> => (await openOut(file, refuse)).close();
        let count: number;
        if (flags.format === 'verl') {
          const rows = await verlDataset(dir, flags.split !== undefined ? { split: flags.split } : {});
          await ready();
          await writeVerlParquet(file, rows);
          count = rows.length;
        } else if (flags.format === 'tokens') {
          const records = await exportTokens(dir, common);
          await ready();
          await writeTokensParquet(file, records);
          count = records.length;
        } else if (flags.format === 'chat-parquet') {
          const records = await exportChat(dir, chatOptions);
          await ready();
          await writeChatParquet(file, records);
          count = records.length;
        } else {
          const records = await exportRun(dir, { ...common, gamma: flags.gamma, state: flags.state });
          await ready();
          await writeParquet(file, records);
          count = records.length;
        }
        io.stderr.write(`${count} ${parquet.unit} written to ${file}\n`);
        return;
      }
      const records: readonly object[] = flags.format === 'chat' ? await exportChat(dir, chatOptions) : flags.format === 'tokens' ? await exportTokens(dir, common) : await exportRun(dir, { ...common, gamma: flags.gamma, state: flags.state });
      if (flags.out !== undefined) {
        const file = (await openOut(flags.out, refuse)).createWriteStream();
        for (const r of records) if (!file.write(`${JSON.stringify(r)}\n`)) await once(file, 'drain');
        file.end();
        await once(file, 'finish');
        io.stderr.write(`${records.length} ${flags.format === 'chat' || flags.format === 'tokens' ? 'episodes' : 'steps'} written to ${flags.out}\n`);
        return;
      }
      // `agent export … | head`: once the reader is gone, stop writing, quietly.
      const out = io.stdout;
      let gone = false;
      out.on('error', () => (gone = true));
      for (const r of records) {
        if (gone) break;
        if (!out.write(`${JSON.stringify(r)}\n`)) await drainOrGone(out);
      }
    });
}

/** `agent export <run-dir>`: the run as trainer input: one record per step (JSON lines or Parquet), or per episode as a chat (`--format chat`). */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { Io } from './io.js';
import { core } from './lib.js';

interface Flags {
  format: 'jsonl' | 'parquet' | 'chat';
  out?: string;
  rewards: 'final' | 'arrived';
  gamma: number;
  state: 'patch' | 'full' | 'none';
  lenient?: boolean;
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
    .argument('<run-dir>', 'a run folder written by agent run')
    .option('--format <format>', 'jsonl or parquet (a record per step), or chat (a record per episode: OpenAI chat messages with tool calls, as TRL, verl and OpenAI fine-tuning read them)', choice(['jsonl', 'parquet', 'chat'] as const), 'jsonl')
    .option('--out <file>', 'where to write (default: stdout for jsonl, <run-dir>/export.parquet for parquet)')
    .option('--rewards <basis>', "final (imputed values count, as the deadlines promised) or arrived (only what really arrived, late included)", choice(['final', 'arrived'] as const), 'final')
    .option('--gamma <g>', 'discount of returns-to-go', gamma, 1)
    .option('--state <mode>', "what each step holds of the state: patch (the seq it was chosen on and the patch the step committed), full (the whole state, on every step), none (the seq)", choice(['patch', 'full', 'none'] as const), 'patch')
    .option('--lenient', 'skip records that are damaged (not JSON, wrong types, a step twice), counting them, instead of refusing the folder')
    .addHelpText('after', '\nExamples:\n  agent export runs/20261130-101500-1a2b3c > steps.jsonl\n  agent export runs/20261130-101500-1a2b3c --format parquet --out steps.parquet --rewards arrived\n  agent export runs/20261130-101500-1a2b3c --state full > steps-with-states.jsonl\n  agent export runs/20261130-101500-1a2b3c --format chat > episodes.chat.jsonl')
    .action(async (dir: string, flags: Flags) => {
      const { exportChat, exportRun, writeParquet } = await core();
      const common = {
        rewards: flags.rewards,
        lenient: flags.lenient === true,
        onSkipped: (s: { records: number; first?: string }) => void io.stderr.write(`warning: skipped ${s.records} bad record${s.records === 1 ? '' : 's'}${s.first !== undefined ? ` (first: ${s.first})` : ''}\n`),
      };
      const records: readonly object[] = flags.format === 'chat' ? await exportChat(dir, common) : await exportRun(dir, { ...common, gamma: flags.gamma, state: flags.state });
      if (flags.format === 'parquet') {
        const file = flags.out ?? `${dir.replace(/\/$/, '')}/export.parquet`;
        await writeParquet(file, records as Awaited<ReturnType<typeof exportRun>>);
        io.stderr.write(`${records.length} steps written to ${file}\n`);
        return;
      }
      const out: NodeJS.WritableStream = flags.out !== undefined ? createWriteStream(flags.out) : io.stdout;
      // `agent export … | head`: once the reader is gone, stop writing, quietly.
      let gone = false;
      out.on('error', () => (gone = true));
      for (const r of records) {
        if (gone) break;
        if (!out.write(`${JSON.stringify(r)}\n`)) await drainOrGone(out);
      }
      if (flags.out !== undefined) {
        out.end();
        await once(out, 'finish');
        io.stderr.write(`${records.length} ${flags.format === 'chat' ? 'episodes' : 'steps'} written to ${flags.out}\n`);
      }
    });
}

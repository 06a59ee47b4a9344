/**
 * `agent reward <run-dir>`: deliver delayed rewards to a run after it has exited (a human
 * review, a business metric); `agent rewards sla <run-dir>`: how each delayed source kept its
 * delivery contract. Both work on the folder alone: run.json carries the sources' contracts.
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { FolderDeliveryReport, SourceSla } from '../src/internal.js';
import type { Io } from './io.js';
import { core } from './lib.js';

interface RewardFlags {
  trace?: string;
  episode?: number;
  step?: number;
  time?: string;
  source?: string;
  value?: string;
  key?: string;
  file?: string;
  json?: boolean;
}

function wholeNumber(v: string): number {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError('expected a whole number.');
  return Number(v);
}

export function registerReward(program: Command, io: Io): void {
  program
    .command('reward')
    .description("Deliver delayed rewards to a finished run's folder: each lands on its step (by trace id, episode + step, or event time), exactly once.")
    .argument('<run-dir>', 'a run folder written by agent run')
    .option('--trace <id>', 'the step, by trace id (see trajectories.jsonl)')
    .option('--episode <n>', 'the step by episode index, with --step or --time', wholeNumber)
    .option('--step <n>', '1-based step within the episode', wholeNumber)
    .option('--time <iso>', 'the step whose state was current at this event time (with --episode)')
    .option('--source <name>', 'the reward source (a delayed one from reward_schema.json)')
    .option('--value <v>', 'the value (a number, true or false)')
    .option('--key <k>', 'idempotency key: resending with the same key is a no-op (default: one value per step and source)')
    .option('--file <feedback.jsonl>', 'deliver many: one {trace_id | episode+step | episode+time, source, value, key?} per line')
    .option('--json', 'print the report as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  agent reward runs/20261130-101500-1a2b3c --trace ep-3:2 --source llm_score --value 0.8\n  agent reward runs/20261130-101500-1a2b3c --episode 3 --time 2026-11-30T10:15:02Z --source human_review --value 1 --key alice\n  agent reward runs/20261130-101500-1a2b3c --file feedback.jsonl',
    )
    .action(async (dir: string, flags: RewardFlags) => {
      const deliveries = flags.file !== undefined ? await fromFile(flags.file) : [{ line: 0, delivery: fromFlags(flags) }];
      const { deliverToRunFolder } = await core();
      const report = await deliverToRunFolder(dir, deliveries);
      io.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : reportText(report, flags.file));
      io.exitCode = report.errors.length > 0 ? 2 : 0;
    });

  const rewards = program.command('rewards').description('Read the rewards of a run folder.');
  rewards
    .command('sla')
    .description('Per delayed source: arrival latency p50/p95/p99, and the shares within deadline, imputed, late and still pending (deadlines applied as of now).')
    .argument('<run-dir>', 'a run folder written by agent run')
    .option('--json', 'print the SLA as JSON')
    .action(async (dir: string, flags: { json?: boolean }) => {
      const { openRunRewards } = await core();
      const run = await openRunRewards(dir);
      const sla = run.ledger.sla();
      io.stdout.write(flags.json ? `${JSON.stringify(sla, null, 2)}\n` : slaText(sla));
    });
}

function fromFlags(f: RewardFlags): Record<string, unknown> {
  if (f.source === undefined || f.value === undefined) throw new InvalidArgumentError('give --source and --value (or --file).');
  if (f.trace === undefined && f.episode === undefined) throw new InvalidArgumentError('name the step: --trace, or --episode with --step or --time.');
  const value = f.value === 'true' ? true : f.value === 'false' ? false : Number(f.value);
  if (typeof value === 'number' && (f.value.trim() === '' || !Number.isFinite(value))) throw new InvalidArgumentError(`--value ${JSON.stringify(f.value)} is not a number.`);
  return {
    source: f.source,
    value,
    ...(f.trace !== undefined ? { trace_id: f.trace } : {}),
    ...(f.episode !== undefined ? { episode: f.episode } : {}),
    ...(f.step !== undefined ? { step: f.step } : {}),
    ...(f.time !== undefined ? { time: f.time } : {}),
    ...(f.key !== undefined ? { key: f.key } : {}),
  };
}

async function fromFile(file: string): Promise<{ line: number; delivery: unknown }[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    throw new InvalidArgumentError(`cannot read --file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
  }
  const { decodeUtf8 } = await core();
  const text = decodeUtf8(bytes, file, 'BAD_USAGE');
  const out: { line: number; delivery: unknown }[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    try {
      out.push({ line: i + 1, delivery: JSON.parse(line) as unknown });
    } catch (err) {
      // Kept as a bad delivery so that it is reported with its line, beside any others.
      out.push({ line: i + 1, delivery: `not JSON: ${(err as Error).message}` });
    }
  });
  return out;
}

function reportText(r: FolderDeliveryReport, file: string | undefined): string {
  const where = (line: number): string => (file === undefined ? '' : `${file}:${line}: `);
  const lines: string[] = [];
  if (r.errors.length > 0) {
    for (const e of r.errors) lines.push(`error: ${where(e.line)}${e.pointer ? `${e.pointer}: ` : ''}${e.message}`);
    lines.push(`nothing written: ${r.errors.length} bad deliver${r.errors.length === 1 ? 'y' : 'ies'} (fix ${r.errors.length === 1 ? 'it' : 'them'} and send again; the good ones will land once)`);
    return `${lines.join('\n')}\n`;
  }
  for (const l of r.landed) lines.push(`${where(l.line)}${l.outcome.padEnd(9)} ${l.source} on ${l.trace_id} (episode ${l.episode}, step ${l.step}); step reward now ${l.reward}`);
  const count = (o: string): number => r.landed.filter((l) => l.outcome === o).length;
  lines.push(`${count('arrived') + count('late')} landed (${count('arrived')} in time, ${count('late')} late), ${count('duplicate')} duplicate${count('duplicate') === 1 ? '' : 's'} ignored${r.imputed > 0 ? `; ${r.imputed} overdue deadline${r.imputed === 1 ? '' : 's'} applied` : ''}`);
  return `${lines.join('\n')}\n`;
}

export function slaText(sla: Readonly<Record<string, SourceSla>>): string {
  const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;
  const ms = (x: number): string => (x >= 3_600_000 ? `${(x / 3_600_000).toFixed(1)}h` : x >= 1_000 ? `${(x / 1_000).toFixed(1)}s` : `${Math.round(x)}ms`);
  const names = Object.keys(sla);
  if (names.length === 0) return 'no delayed reward sources: every reward came with its step\n';
  const lines = names.map((n) => {
    const s = sla[n] as SourceSla;
    const lat = s.latency_ms ? `p50 ${ms(s.latency_ms.p50)}, p95 ${ms(s.latency_ms.p95)}, p99 ${ms(s.latency_ms.p99)}` : 'no arrivals';
    return `${n}: ${s.expected} expected · ${lat} · within deadline ${pct(s.share_within_deadline)} · imputed ${pct(s.share_imputed)} · late ${pct(s.share_late)} · pending ${pct(s.share_pending)}${s.failed > 0 ? ` · failed ${s.failed}` : ''}`;
  });
  return `${lines.join('\n')}\n`;
}

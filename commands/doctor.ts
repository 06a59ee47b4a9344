/** `agent doctor --store redis://…`: the health of a Redis-backed store (memory, stream lengths, warnings). */
import type { Command } from 'commander';
import type { StoreHealth } from '../src/internal.js';
import type { Io } from './io.js';
import { core } from './lib.js';
import { ratio, wholeNumber } from './options.js';

interface Flags {
  store: string;
  prefix: string;
  maxStreamLength: number;
  memoryShare: number;
  json?: boolean;
}

export function registerDoctor(program: Command, io: Io): void {
  program
    .command('doctor')
    .description('Check a Redis-backed store: server, memory against its limit, the longest delta streams; warn about unbounded growth.')
    .requiredOption('--store <url>', 'the store to check (redis://host:port/db)', process.env['AGENT_STORE'])
    .option('--prefix <prefix>', 'key prefix to inspect (agent:<run-id>: for one run)', 'agent:')
    .option('--max-stream-length <n>', 'warn about a delta stream longer than this', wholeNumber, 100_000)
    .option('--memory-share <r>', 'warn when used memory passes this share of maxmemory', ratio, 0.8)
    .option('--json', 'print the report as JSON')
    .addHelpText('after', '\nExamples:\n  agent doctor --store redis://127.0.0.1:6379/0\n  agent doctor --store redis://127.0.0.1:6379/0 --prefix agent:20261130-101500-1a2b3c: --json')
    .action(async (flags: Flags) => {
      const { storeHealth } = await core();
      const health = await storeHealth(flags.store, { prefix: flags.prefix, maxStreamLength: flags.maxStreamLength, memoryShare: flags.memoryShare });
      io.stdout.write(flags.json ? `${JSON.stringify(health, null, 2)}\n` : text(health));
      io.exitCode = health.warnings.length > 0 ? 1 : 0;
    });
}

function text(h: StoreHealth): string {
  const mb = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MB`;
  const lines = [
    `${h.url}: Redis ${h.redisVersion}, ${mb(h.usedMemoryBytes)} used${h.maxMemoryBytes > 0 ? ` of ${mb(h.maxMemoryBytes)}` : ' (no maxmemory)'}`,
    `${h.instances} instance histor${h.instances === 1 ? 'y' : 'ies'}${h.longestStreams.length > 0 ? `; longest: ${h.longestStreams.map((s) => `${s.key} (${s.length})`).join(', ')}` : ''}`,
    ...h.warnings.map((w) => `warning: ${w}`),
    ...h.notes.map((n) => `note: ${n}`),
  ];
  return `${lines.join('\n')}\n`;
}

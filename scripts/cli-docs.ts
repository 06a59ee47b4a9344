/**
 * docs/reference/cli.md, generated from the commands' own definitions (commander): every command
 * with its arguments, every option with its default, and the examples its `--help` shows, so the
 * reference cannot drift from what `agent` accepts. `npm run docs:cli` rewrites it;
 * scripts/cli-docs.test.ts fails when the committed file is not what the commands say.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import type { Command, Option } from 'commander';
import { createProgram } from '../commands/main.js';

const ROOT = path.resolve(import.meta.dirname, '..');
export const CLI_DOCS = path.join(ROOT, 'docs', 'reference', 'cli.md');

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** A default as the reader would type it; the environment variables an option reads are named in its description. */
function shownDefault(o: Option): string {
  if (o.defaultValueDescription !== undefined) return `\`${o.defaultValueDescription}\``;
  const d: unknown = o.defaultValue;
  if (d === undefined || d === false) return '';
  if (typeof d === 'object') return Object.keys(d as object).length === 0 ? '' : `\`${JSON.stringify(d)}\``;
  return `\`${String(d)}\``;
}

function commandSection(c: Command): string {
  const lines = [`## \`agent ${c.name()}\``, '', c.description(), '', '```', `agent ${c.name()} ${c.usage()}`, '```', ''];
  const args = c.registeredArguments;
  if (args.length > 0) {
    lines.push('| argument | required | description |', '|---|---|---|');
    for (const a of args) lines.push(`| \`${a.name()}\` | ${a.required ? 'yes' : 'no'} | ${cell(a.description)} |`);
    lines.push('');
  }
  const options = c.options.filter((o) => !o.hidden);
  if (options.length > 0) {
    lines.push('| option | default | description |', '|---|---|---|');
    for (const o of options) lines.push(`| \`${o.flags}\` | ${shownDefault(o)} | ${cell(o.description)} |`);
    lines.push('');
  }
  // The examples each command adds after its help.
  const after = helpAfter(c);
  if (after) lines.push('```', after, '```', '');
  return lines.join('\n');
}

/** What `addHelpText('after', …)` printed under the command's help. */
function helpAfter(c: Command): string {
  let text = '';
  c.configureOutput({ writeOut: (s) => void (text += s) });
  const help = c.helpInformation();
  c.outputHelp();
  return text.slice(text.indexOf(help) + help.length).trim();
}

export function renderCliDocs(): string {
  const sink = new PassThrough();
  // Defaults some options take from the environment ($AGENT_STORE, $AGENT_TOKEN, OpenTelemetry's) are shown as the flags' own.
  const environment = process.env;
  process.env = Object.fromEntries(Object.entries(environment).filter(([k]) => !/^(AGENT_|OTEL_)/.test(k)));
  let program: Command;
  try {
    program = createProgram({ stdout: sink, stderr: sink, exitCode: 0 });
  } finally {
    process.env = environment;
  }
  const commands = program.commands.filter((c) => !(c as Command & { _hidden?: boolean })._hidden);
  return [
    '# The `agent` command',
    '',
    '<!-- Generated from the commands\' definitions by `npm run docs:cli`; edit commands/, not this file. -->',
    '',
    `${program.description()} Each command's \`--help\` says the same as its section here.`,
    '',
    'Exit codes: 0 done, 1 the run or check found failures (a failing fuzz case, a breaking schema change, a benchmark regression), 2 bad usage or input (nothing was written), 130 interrupted (Ctrl-C).',
    '',
    ...commands.map((c) => `- [\`agent ${c.name()}\`](#agent-${c.name()}): ${c.description()}`),
    '',
    ...commands.map(commandSection),
  ].join('\n').trimEnd() + '\n';
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(CLI_DOCS, renderCliDocs());
  console.log(`wrote ${path.relative(ROOT, CLI_DOCS)}`);
}

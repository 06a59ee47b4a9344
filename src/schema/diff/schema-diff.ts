/**
 * `agent schema-diff` as a library call: resolves what to compare (two env folders, two schema
 * files, or an env folder against itself at a git revision), runs the diff, applies the ignore
 * file and returns the report.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { AgentError, UsageError } from '../../shared/errors.js';
import type { Severity } from './compare.js';
import { diffEnvFolders, diffSchemaFiles, type DiffKind, type DiffMode, type Finding } from './diff.js';
import { buildReport, parseIgnoreFile, type DiffReport } from './report.js';

export interface SchemaDiffOptions {
  readonly old?: string;
  readonly new: string;
  /** Compare `new` (an env folder) with the same folder at this git revision. */
  readonly base?: string;
  readonly kind?: DiffKind;
  readonly mode?: DiffMode;
  readonly tolerant?: boolean;
  readonly failOn?: Severity;
  readonly ignoreFile?: string;
  readonly today?: string;
  readonly signal?: AbortSignal;
}

async function isDir(p: string): Promise<boolean | undefined> {
  const s = await stat(p).catch(() => undefined);
  return s?.isDirectory();
}

export async function schemaDiff(options: SchemaDiffOptions): Promise<DiffReport> {
  const mode = options.mode ?? 'default';
  const failOn = options.failOn ?? 'breaking';
  const ignores = options.ignoreFile ? parseIgnoreFile(await readFile(options.ignoreFile, 'utf8').catch(() => { throw new UsageError(`cannot read ignore file '${options.ignoreFile}'`); }), options.ignoreFile) : [];
  const diffOptions = { mode, ...(options.tolerant ? { tolerant: true } : {}), ...(options.signal ? { signal: options.signal } : {}) };
  let findings: Finding[];
  let oldLabel: string;
  if (options.base !== undefined) {
    if (!(await isDir(options.new))) throw new UsageError(`--base needs an env folder, and '${options.new}' is not one`);
    const extracted = await extractAtRevision(options.new, options.base, options.signal);
    try {
      findings = await diffEnvFolders(extracted.dir, options.new, diffOptions);
    } finally {
      await rm(extracted.root, { recursive: true, force: true });
    }
    oldLabel = `${options.new}@${options.base}`;
  } else {
    if (options.old === undefined) throw new UsageError('schema-diff needs <old> and <new>, or <env-dir> --base <git-rev>');
    const [oldDir, newDir] = await Promise.all([isDir(options.old), isDir(options.new)]);
    if (oldDir === undefined || newDir === undefined) {
      throw new AgentError('DEFINITION_NOT_FOUND', `'${oldDir === undefined ? options.old : options.new}' does not exist`, { hint: 'Pass two env folders or two schema files.' });
    }
    if (oldDir !== newDir) throw new UsageError('compare a folder with a folder, or a file with a file');
    findings = oldDir ? await diffEnvFolders(options.old, options.new, diffOptions) : await diffSchemaFiles(options.old, options.new, { ...diffOptions, ...(options.kind ? { kind: options.kind } : {}) });
    oldLabel = options.old;
  }
  return buildReport(findings, { old: oldLabel, new: options.new, mode, failOn, ignores, ...(options.today ? { today: options.today } : {}) });
}

/** Write the env folder as it was at `rev` into a temporary directory (git archive | tar). */
async function extractAtRevision(dir: string, rev: string, signal?: AbortSignal): Promise<{ root: string; dir: string }> {
  const abs = path.resolve(dir);
  const opts = signal ? { cancelSignal: signal } : {};
  const top = await execa('git', ['rev-parse', '--show-toplevel'], { cwd: abs, reject: false, ...opts });
  if (top.exitCode !== 0) throw new UsageError(`'${dir}' is not inside a git repository`, '--base compares with a git revision; run it inside the repository.');
  const repo = String(top.stdout).trim();
  const rel = path.relative(repo, abs) || '.';
  const exists = await execa('git', ['cat-file', '-e', `${rev}:${rel === '.' ? '' : rel}`], { cwd: repo, reject: false, ...opts });
  if (exists.exitCode !== 0) throw new UsageError(`'${rel}' does not exist at revision '${rev}'`, 'Check the revision (git log) and the folder name.');
  const root = await mkdtemp(path.join(os.tmpdir(), 'agent-schema-diff-'));
  const archive = await execa('git', ['archive', '--format=tar', rev, '--', rel], { cwd: repo, encoding: 'buffer', ...opts });
  await execa('tar', ['-x', '-C', root], { input: archive.stdout, ...opts });
  return { root, dir: path.join(root, rel) };
}

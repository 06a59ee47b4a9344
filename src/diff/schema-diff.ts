/**
 * `agent schema-diff` as a library call: resolves what to compare (two env folders, two schema
 * files, or an env folder against itself at a git revision), runs the diff, applies the ignore
 * file and returns the report.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { shippedEnvDir } from '../schema/shipped-envs.js';
import { AgentError, UsageError } from '../shared/errors.js';
import type { Severity } from './compare.js';
import { diffEnvFolders, diffSchemaFiles, type DiffKind, type DiffMode, type Finding } from './diff.js';
import { buildReport, parseIgnoreFile, type DiffReport } from './report.js';

/** What `schemaDiff` compares (two env folders or schema files), in which direction, and when it fails. */
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

/** Compares two versions of an env's schemas (folders or files) and returns the report `agent schema-diff` prints. */
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
    // A shipped env's name stands for its folder, as everywhere an env folder is taken.
    const [oldPath, newPath] = await Promise.all([options.old, options.new].map(async (p) => ((await isDir(p)) === undefined ? (shippedEnvDir(p) ?? p) : p)));
    const [oldDir, newDir] = await Promise.all([isDir(oldPath as string), isDir(newPath as string)]);
    if (oldDir === undefined || newDir === undefined) {
      throw new AgentError('DEFINITION_NOT_FOUND', `'${oldDir === undefined ? options.old : options.new}' does not exist`, { hint: 'Pass two env folders or two schema files.' });
    }
    if (oldDir !== newDir) throw new UsageError('compare a folder with a folder, or a file with a file');
    findings = oldDir ? await diffEnvFolders(oldPath as string, newPath as string, diffOptions) : await diffSchemaFiles(oldPath as string, newPath as string, { ...diffOptions, ...(options.kind ? { kind: options.kind } : {}) });
    oldLabel = options.old;
  }
  return buildReport(findings, { old: oldLabel, new: options.new, mode, failOn, ignores, ...(options.today ? { today: options.today } : {}) });
}

const run = promisify(execFile);

/** Exit status 0, without throwing on any other. */
async function succeeds(file: string, args: string[], cwd: string, signal: AbortSignal | undefined): Promise<string | undefined> {
  try {
    return (await run(file, args, { cwd, ...(signal ? { signal } : {}) })).stdout;
  } catch {
    if (signal?.aborted) throw signal.reason as Error;
    return undefined;
  }
}

/** Write the env folder as it was at `rev` into a temporary directory (git archive | tar). */
async function extractAtRevision(dir: string, rev: string, signal?: AbortSignal): Promise<{ root: string; dir: string }> {
  const abs = path.resolve(dir);
  const top = await succeeds('git', ['rev-parse', '--show-toplevel'], abs, signal);
  if (top === undefined) throw new UsageError(`'${dir}' is not inside a git repository`, '--base compares with a git revision; run it inside the repository.');
  const repo = top.trim();
  const rel = path.relative(repo, abs) || '.';
  if ((await succeeds('git', ['rev-parse', '--verify', '--quiet', `${rev}^{commit}`], repo, signal)) === undefined) {
    throw new UsageError(`no revision '${rev}' in ${repo}`, 'Pass a commit, branch or tag git knows (git log --oneline, git branch -a); in CI, fetch it first (actions/checkout with fetch-depth: 0).');
  }
  if ((await succeeds('git', ['cat-file', '-e', `${rev}:${rel === '.' ? '' : rel}`], repo, signal)) === undefined) {
    throw new UsageError(`'${rel}' does not exist at revision '${rev}'`, 'Check the revision (git log) and the folder name.');
  }
  const root = await mkdtemp(path.join(os.tmpdir(), 'agent-schema-diff-'));
  await new Promise<void>((resolve, reject) => {
    const git = spawn('git', ['archive', '--format=tar', rev, '--', rel], { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'], ...(signal ? { signal } : {}) });
    const tar = spawn('tar', ['-x', '-C', root], { stdio: ['pipe', 'ignore', 'inherit'], ...(signal ? { signal } : {}) });
    git.stdout.pipe(tar.stdin);
    git.on('error', reject);
    tar.on('error', reject);
    tar.on('close', (code) => (code === 0 ? resolve() : reject(new AgentError('INTERNAL', `git archive | tar exited with ${code}`))));
  });
  return { root, dir: path.join(root, rel) };
}

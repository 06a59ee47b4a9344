/**
 * An agent program's command line as the user wrote it, made to work from the episode's own
 * folder: each bare word that names a file in the folder `agent` was started from
 * (`examples/agents/openai-tools.mjs`, `.venv/bin/python`, `agent.py`) is made absolute, since
 * the program runs elsewhere. Words that name no such file (`python3`, `--stream`, `.`) are left
 * as they are. For a program in a sandbox, also the host folders it must see read-only: that
 * folder, and where each named file really lives (a venv's python links to its base install).
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';

/** Quoting and expansion are the shell's: only words made of these are read as paths. */
const BARE = /^[A-Za-z0-9_./@+=:,-]+$/;
/** Seen in every sandbox already. */
const SYSTEM = ['/usr/', '/bin/', '/sbin/', '/lib', '/etc/'];

export interface ProgramCommandLine {
  /** The command line with its files' paths absolute. */
  readonly line: string;
  /** Host folders a sandboxed program needs to see, read-only. */
  readonly readOnly: readonly string[];
}

export function programCommandLine(command: string, cwd: string): ProgramCommandLine {
  const files: string[] = [];
  const line = command
    .split(/(\s+)/)
    .map((word) => {
      if (!BARE.test(word) || word.startsWith('-')) return word;
      const file = path.resolve(cwd, word);
      if (!isFile(file)) return word;
      files.push(file);
      return path.isAbsolute(word) ? word : BARE.test(file) ? file : `'${file.replace(/'/g, "'\\''")}'`;
    })
    .join('');
  const readOnly = new Set<string>([cwd]);
  for (const file of files) {
    const real = realpathSync(file);
    if (real.startsWith(`${cwd}/`) || SYSTEM.some((dir) => real.startsWith(dir))) continue;
    const dir = path.dirname(real);
    // An interpreter in <prefix>/bin needs its whole install (its standard library beside bin/).
    readOnly.add(path.basename(dir) === 'bin' ? path.dirname(dir) : dir);
  }
  return { line, readOnly: [...readOnly] };
}

function isFile(p: string): boolean {
  try {
    return existsSync(p) && statSync(p).isFile();
  } catch {
    return false;
  }
}

/** An agent program's command line from the caller's folder: its files made absolute, the folders a sandboxed program must see. */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { programCommandLine } from './program-command.js';

const root = await mkdtemp(path.join(os.tmpdir(), 'program-command-'));
afterAll(() => rm(root, { recursive: true, force: true }));

describe("an agent program's command line", () => {
  it('makes the files it names in the caller’s folder absolute, and leaves every other word alone', async () => {
    const project = path.join(root, 'project');
    await mkdir(path.join(project, 'agents'), { recursive: true });
    await writeFile(path.join(project, 'agents', 'run.py'), '');
    await writeFile(path.join(project, 'config.json'), '');
    const { line, readOnly } = programCommandLine("python3 agents/run.py --config config.json --out . 'agents/run.py' $HOME/x", project);
    expect(line).toBe(`python3 ${project}/agents/run.py --config ${project}/config.json --out . 'agents/run.py' $HOME/x`);
    expect(readOnly).toEqual([project]);
  });

  it('adds where a named interpreter really lives: a venv’s python links to its base install', async () => {
    const project = path.join(root, 'venv-project');
    const base = path.join(root, 'pythons', '3.11', 'bin');
    await mkdir(base, { recursive: true });
    await writeFile(path.join(base, 'python3.11'), '');
    await mkdir(path.join(project, '.venv', 'bin'), { recursive: true });
    await symlink(path.join(base, 'python3.11'), path.join(project, '.venv', 'bin', 'python'));
    const { line, readOnly } = programCommandLine('.venv/bin/python -u agent.py', project);
    expect(line).toBe(`${project}/.venv/bin/python -u agent.py`);
    expect(readOnly).toEqual([project, path.join(root, 'pythons', '3.11')]);
  });
});

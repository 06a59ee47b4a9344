import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readRunFolder, recordedSteps, Run } from '../internal.js';
import { RECORDINGS } from './recordings.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('recorded runs replay to the same trajectory', () => {
  it.each(RECORDINGS.map((r) => [r.file, r] as const))('%s', async (_file, r) => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'agent-replay-'));
    dirs.push(out);
    await using run = await Run.prepare({ ...r.options, out });
    await run.execute();
    const now = recordedSteps((await readRunFolder(run.dir as string)).trajectories);
    const recorded = (await readFile(r.file, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as unknown);
    // If a change to trajectories is intended, re-record with `npm run record` and review the diff.
    expect(now).toEqual(recorded);
  });
});

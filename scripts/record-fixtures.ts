/**
 * Re-record fixtures/recorded/*.jsonl: run each recorded configuration and write the steps a seed
 * determines. Run it (npm run record) only when a change to trajectories is intended; the test
 * src/replay/recording.test.ts replays these files.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readRunFolder, recordedSteps, Run } from '../src/internal.js';
import { RECORDINGS } from '../src/run/recordings.js';

const out = await mkdtemp(path.join(os.tmpdir(), 'agent-record-'));
try {
  for (const r of RECORDINGS) {
    await using run = await Run.prepare({ ...r.options, out });
    await run.execute();
    const steps = recordedSteps((await readRunFolder(run.dir as string)).trajectories);
    await writeFile(r.file, steps.map((s) => JSON.stringify(s)).join('\n') + '\n');
    console.log(`${r.file}: ${steps.length} steps`);
  }
} finally {
  await rm(out, { recursive: true, force: true });
}

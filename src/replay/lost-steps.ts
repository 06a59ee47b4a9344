/**
 * On resume, the run folder's trajectories are rewritten from the run's journal in Redis. A step
 * the folder shows but the journal lacks was acknowledged by Redis and then lost (Redis restarted
 * without it on disk): such steps are set aside in `trajectories.lost.jsonl` and counted, never
 * dropped silently. A torn last line (the process died mid-write) is not a step.
 */
import { appendFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { SettledStepEvent } from '../events/run-events.js';
import { RUN_FILES } from './run-writer.js';

const LOST_STEPS_FILE = 'trajectories.lost.jsonl';

export async function readLostSteps(dir: string, committed: readonly SettledStepEvent[]): Promise<number> {
  let text: string;
  try {
    text = await readFile(path.join(dir, RUN_FILES.trajectories), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const known = new Set(committed.map((s) => s.trace_id));
  const lost: string[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let record: { trace_id?: unknown };
    try {
      record = JSON.parse(line) as { trace_id?: unknown };
    } catch {
      continue;
    }
    if (typeof record.trace_id === 'string' && !known.has(record.trace_id)) lost.push(line);
  }
  if (lost.length > 0) await appendFile(path.join(dir, LOST_STEPS_FILE), `${lost.join('\n')}\n`);
  return lost.length;
}

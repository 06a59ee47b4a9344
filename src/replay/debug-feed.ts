/**
 * A feed of one run's events into a {@link RunIndex}, as `agent debug` consumes it: from a run
 * folder (finished, interrupted, or still being written and followed like `tail -f`) or from a
 * live run's event stream. Either way the console asks the same questions: the index, an
 * episode's events, and an episode's history (its initial state and every commit).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { JsonValue } from '../shared/json.js';
import { archiveFile, readArchive } from '../state/archive.js';
import { applyPatch, type Patch } from '../state/patch.js';
import type { IndexedEvent, RunIndex } from './run-index.js';

export interface FeedStatus {
  /** `indexing` while a folder is first read, `following` while it grows, `live`/`reconnecting` attached to a run. */
  readonly phase: 'indexing' | 'following' | 'finished' | 'live' | 'reconnecting';
  /** Indexing progress, 0 … 1. */
  readonly progress?: number;
  readonly error?: string;
}

export interface Commit {
  readonly seq: number;
  readonly time: number;
  readonly traceId?: string;
  readonly patch: Patch;
}

export interface EpisodeHistory {
  readonly episode: number;
  readonly instanceId: string;
  readonly initial: JsonValue;
  /** In seq order, one per seq. */
  readonly commits: readonly Commit[];
  /** `states[i]` is the state after `commits[i - 1]` (`states[0]` the initial one); unchanged parts are shared. */
  readonly states: readonly JsonValue[];
}

/** An episode's history with the state after every commit. */
export function historyOf(episode: number, instanceId: string, initial: JsonValue, commits: readonly Commit[]): EpisodeHistory {
  const states: JsonValue[] = [initial];
  for (const c of commits) states.push(applyPatch(states[states.length - 1] as JsonValue, c.patch));
  return { episode, instanceId, initial, commits, states };
}

export interface DebugFeed extends AsyncDisposable {
  /** The run folder or the address attached to. */
  readonly title: string;
  readonly index: RunIndex<unknown>;
  status(): FeedStatus;
  /** Called (at most once per event batch) when the index or the status changed. */
  onChange(listener: () => void): () => void;
  episodeEvents(episode: number, signal?: AbortSignal): Promise<readonly IndexedEvent[]>;
  episodeHistory(episode: number, signal?: AbortSignal): Promise<EpisodeHistory>;
}

/** After a resume a seq can appear twice (written, undone by the crash, written again): the last one stands. */
export function dedupeCommits(commits: readonly Commit[]): Commit[] {
  const bySeq = new Map<number, Commit>();
  for (const c of commits) bySeq.set(c.seq, c);
  return [...bySeq.values()].sort((a, b) => a.seq - b.seq);
}

/**
 * An episode's commits: a durable run's archive (`<run>/history/`) when it has one, since that is
 * what Redis committed (events may also hold steps a crash undid); else its `state_committed` events.
 */
export async function episodeCommits(runDir: string, instanceId: string, events: readonly IndexedEvent[]): Promise<Commit[]> {
  const archived = path.join(runDir, 'history');
  if (!existsSync(archiveFile(archived, instanceId))) return commitsOf(events);
  return dedupeCommits((await readArchive(archived, instanceId)).map((d) => ({ seq: d.seq, time: d.time, ...(d.trace_id ? { traceId: d.trace_id } : {}), patch: d.patch })));
}

/** An episode's commits, from its `state_committed` events. */
export function commitsOf(events: readonly IndexedEvent[]): Commit[] {
  return dedupeCommits(
    events
      .filter((e) => e.type === 'state_committed')
      .map((e) => ({ seq: e['seq'] as number, time: e.time, ...(typeof e['trace_id'] === 'string' ? { traceId: e['trace_id'] } : {}), patch: e['patch'] as Patch })),
  );
}

/**
 * Questions a run folder answers without the run: one trace's events and timings, an episode's
 * state at any seq or time, and every change to one field. The folder is streamed, never loaded
 * whole. States are rebuilt from the episode's initial state (states.jsonl) and its committed
 * patches: the archived history (history/, durable runs) when there is one, else the
 * `state_committed` events.
 */
import path from 'node:path';
import { AgentError } from '../shared/errors.js';
import { isPlainObject, parsePointer, valueAtPointer, type JsonValue } from '../shared/json.js';
import { changedFiles, type WorkspaceListing } from '../sandbox/workspace-listing.js';
import { episodeCommits, type Commit } from './debug-feed.js';
import type { IndexedEvent } from './run-index.js';
import { applyPatch, type Patch } from '../state/patch.js';
import { forEachLine, readManifest, RecordReading } from './run-rewards.js';
import { rewardEvent, type RewardLogRecord } from './reward-log.js';
import { RUN_FILES } from './run-writer.js';

type Event = Record<string, unknown> & { readonly type: string; readonly time: number };

/** One call in a run folder, as `agent debug` shows it: its action and params, status, timing, error, and the events of its life. */
export interface TraceReport {
  readonly trace_id: string;
  readonly episode: number;
  readonly action: string;
  /** `user` for a call the env's other side made (a τ²-bench user on their phone). */
  readonly actor?: 'user';
  readonly params: JsonValue;
  readonly status: 'resolved' | 'failed' | 'pending';
  /** Dispatch to settle, and the tool's own time. */
  readonly duration_ms?: number;
  readonly tool_ms?: number;
  readonly attempts?: number;
  readonly error?: JsonValue;
  /** What the agent saw (a sandbox tool's: its exit code, stdout and stderr). */
  readonly observation?: JsonValue;
  /** For a call that ran commands in the episode's sandbox: the workspace files it added, changed and removed. */
  readonly files?: { readonly added: readonly string[]; readonly changed: readonly string[]; readonly removed: readonly string[] };
  /** Each event of the trace, with its offset from the dispatch. */
  readonly events: readonly { readonly type: string; readonly time: string; readonly at_ms: number; readonly detail?: JsonValue }[];
}

/** The events and timings of one trace (dispatch, tool start and finish, commit, settle, rewards). */
export async function inspectTrace(dir: string, traceId: string): Promise<TraceReport> {
  await readManifest(dir);
  const events: Event[] = [];
  let finishedAt: number | undefined;
  await forEachLine(path.join(dir, RUN_FILES.events), (r) => {
    if (r['trace_id'] === traceId) events.push(r as Event);
    else if (r['type'] === 'run_finished') finishedAt = r['time'] as number;
  });
  // Values delivered after the run (`agent reward`) are only in the reward log: those from after its end.
  if (finishedAt !== undefined) {
    const end = finishedAt;
    await forEachLine(path.join(dir, RUN_FILES.rewards), (r) => {
      if (r['trace_id'] === traceId && (r['time'] as number) > end) events.push(rewardEvent(r as unknown as RewardLogRecord) as unknown as Event);
    }, { reading: new RecordReading(true) });
  }
  events.sort((a, b) => a.time - b.time);
  const dispatched = events.find((e) => e.type === 'dispatched');
  const settled = events.find((e) => e.type === 'trace_settled');
  // A call in flight when its run's process died may have lost its dispatch with the process; a
  // resume settles it (TOOL_LOST), and that record says what it was.
  const head = dispatched ?? settled;
  if (!head) throw new AgentError('BAD_USAGE', `no trace '${traceId}' in ${dir}`, { hint: 'Trace ids look like ep-3:7 (instance, then the call number): see trajectories.jsonl.' });
  const finished = events.filter((e) => e.type === 'tool_finished').pop();
  const t0 = dispatched?.time ?? (settled ? settled.time - ((settled['duration_ms'] as number | undefined) ?? 0) : 0);
  const files = await workspaceChanges(dir, head['episode'] as number, settled, events.find((e) => e.type === 'state_committed'));
  return {
    trace_id: traceId,
    episode: head['episode'] as number,
    action: head['action'] as string,
    ...(settled?.['actor'] === 'user' ? { actor: 'user' as const } : {}),
    params: head['params'] as JsonValue,
    status: settled ? (settled['status'] as 'resolved' | 'failed') : 'pending',
    ...(settled ? { duration_ms: settled['duration_ms'] as number } : {}),
    ...(finished ? { tool_ms: finished['duration_ms'] as number, attempts: finished['attempts'] as number } : {}),
    ...(settled?.['error'] ? { error: settled['error'] as JsonValue } : {}),
    ...(settled && 'observation' in settled ? { observation: settled['observation'] as JsonValue } : {}),
    ...(files ? { files } : {}),
    events: events.map((e) => {
      const detail = detailOf(e);
      return { type: e.type, time: new Date(e.time).toISOString(), at_ms: e.time - t0, ...(detail !== undefined ? { detail } : {}) };
    }),
  };
}

/**
 * The files a call changed in its episode's sandbox workspace: its commit writes the workspace's
 * listing (env.json `sandbox.listing_to`), compared here with the listing in the state it started from.
 */
async function workspaceChanges(dir: string, episode: number, settled: Event | undefined, commit: Event | undefined): Promise<TraceReport['files']> {
  const op = (commit?.['patch'] as Patch | undefined)?.find((o) => (o.op === 'add' || o.op === 'replace') && isListing(o.value));
  if (!op || !('value' in op) || !isListing(op.value) || !settled || typeof settled['seq_before'] !== 'number') return undefined;
  const before = valueAtPointer((await inspectState(dir, episode, { seq: settled['seq_before'] })).state, op.path);
  return changedFiles(isListing(before) ? before : undefined, op.value);
}

function isListing(v: unknown): v is WorkspaceListing {
  return isPlainObject(v) && isPlainObject(v['files']) && Object.values(v['files']).every((f) => isPlainObject(f) && (typeof f['sha256'] === 'string' || typeof f['link'] === 'string'));
}

function detailOf(e: Event): JsonValue | undefined {
  switch (e.type) {
    case 'tool_finished':
      return { ok: e['ok'] as boolean, duration_ms: e['duration_ms'] as number, attempts: e['attempts'] as number, ...(e['error'] ? { error: e['error'] as JsonValue } : {}) };
    case 'state_committed':
      return { seq: e['seq'] as number, patch: e['patch'] as JsonValue };
    case 'trace_settled':
      return { status: e['status'] as string, step: e['step'] as number, reward: e['reward'] as number };
    case 'reward_arrived':
    case 'reward_late':
    case 'reward_imputed':
      return { source: e['source'] as string, value: e['value'] as number };
    default:
      return undefined;
  }
}

/** An episode's initial state and its commits in order. */
async function history(dir: string, episode: number): Promise<{ instanceId: string; startedAt: number; initial: JsonValue; commits: Commit[] }> {
  await readManifest(dir);
  let instanceId: string | undefined;
  let stateId: string | undefined;
  let startedAt = 0;
  const committed: IndexedEvent[] = [];
  await forEachLine(path.join(dir, RUN_FILES.events), (r) => {
    if (r['type'] === 'episode_started' && r['episode'] === episode) {
      // A resumed episode starts again: the first start is when it began.
      if (instanceId === undefined) startedAt = r['time'] as number;
      instanceId = r['instance_id'] as string;
      stateId = r['initial_state_id'] as string;
    } else if (r['type'] === 'state_committed' && instanceId !== undefined && r['instance_id'] === instanceId) {
      committed.push(r as IndexedEvent);
    }
  });
  if (instanceId === undefined || stateId === undefined) throw new AgentError('BAD_USAGE', `no episode ${episode} in ${dir}`, { hint: 'Episodes are numbered from 0: see episodes.jsonl.' });
  let initial: JsonValue | undefined;
  await forEachLine(path.join(dir, RUN_FILES.states), (r) => {
    if (r['state_id'] === stateId) initial = r['state'] as JsonValue;
  });
  if (initial === undefined) throw new AgentError('STATE_CORRUPT', `states.jsonl has no ${stateId}, the initial state of episode ${episode}`);
  return { instanceId, startedAt, initial, commits: await episodeCommits(dir, instanceId, committed) };
}

/** An episode's state at one seq, as `agent debug` shows it. */
export interface StateReport {
  readonly episode: number;
  readonly instance_id: string;
  readonly seq: number;
  readonly time: string | null;
  readonly state: JsonValue;
}

/** An episode's state at a seq (default: its last), or as it stood at a time. */
export async function inspectState(dir: string, episode: number, point: { readonly seq?: number; readonly time?: number } = {}): Promise<StateReport> {
  const h = await history(dir, episode);
  const last = h.commits[h.commits.length - 1]?.seq ?? 0;
  if (point.seq !== undefined && (point.seq < 0 || point.seq > last)) throw new AgentError('BAD_USAGE', `episode ${episode} has seqs 0 … ${last} (asked for ${point.seq})`, { hint: 'Pass --at with a seq in that range.' });
  if (point.time !== undefined && point.time < h.startedAt) {
    throw new AgentError('BAD_USAGE', `episode ${episode} began at ${new Date(h.startedAt).toISOString()}, after ${new Date(point.time).toISOString()}: it had no state then`, { hint: 'Pass --time at or after its start, or --at 0 for its initial state.' });
  }
  let state = h.initial;
  let seq = 0;
  let time: number | undefined;
  for (const c of h.commits) {
    if (point.seq !== undefined && c.seq > point.seq) break;
    if (point.time !== undefined && c.time > point.time) break;
    state = applyPatch(state, c.patch);
    seq = c.seq;
    time = c.time;
  }
  return { episode, instance_id: h.instanceId, seq, time: time === undefined ? null : new Date(time).toISOString(), state };
}

/** One change of a state field in an episode, as `agent debug` shows it: the seq and time, the trace that made it, and the new value. */
export interface FieldChange {
  readonly seq: number;
  readonly time: string;
  readonly trace_id?: string;
  /** The value after the change; absent when the change removed the field. */
  readonly value?: JsonValue;
}

/** Every change to the value at `pointer` over an episode (its initial value as seq 0). */
export async function inspectField(dir: string, episode: number, pointer: string): Promise<{ readonly episode: number; readonly pointer: string; readonly changes: readonly FieldChange[] }> {
  try {
    parsePointer(pointer);
  } catch {
    throw new AgentError('BAD_USAGE', `'${pointer}' is not a JSON pointer`, { hint: 'Pointers start with / (e.g. /user/name), with ~1 for / and ~0 for ~ inside a key.' });
  }
  const h = await history(dir, episode);
  const at = (state: JsonValue): JsonValue | undefined => valueAtPointer(state, pointer);
  let state = h.initial;
  let before = at(state);
  const changes: FieldChange[] = [{ seq: 0, time: '', ...(before !== undefined ? { value: before } : {}) }];
  for (const c of h.commits) {
    state = applyPatch(state, c.patch);
    const now = at(state);
    if (JSON.stringify(now) === JSON.stringify(before)) continue;
    changes.push({ seq: c.seq, time: new Date(c.time).toISOString(), ...(c.traceId ? { trace_id: c.traceId } : {}), ...(now !== undefined ? { value: now } : {}) });
    before = now;
  }
  return { episode, pointer, changes };
}

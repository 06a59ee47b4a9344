/** RunIndex on its own: traces by id as rows arrive, and a call dispatched again under its id (a resumed run). */
import { describe, expect, it } from 'vitest';
import { RunIndex, type IndexedEvent } from './run-index.js';

const dispatched = (traceId: string, time: number, episode = 0): IndexedEvent => ({ type: 'dispatched', time, trace_id: traceId, episode, action: 'a' });
const settled = (traceId: string, time: number, step: number): IndexedEvent => ({ type: 'trace_settled', time, trace_id: traceId, episode: 0, step, status: 'resolved', rewards: {} });

describe('RunIndex', () => {
  it('finds traces by id whenever asked, rows dispatched before and after the first lookup alike', () => {
    const index = new RunIndex<number>();
    index.ingest(dispatched('t:1', 1), 0);
    expect(index.trace('t:1')?.status).toBe('pending');
    index.ingest(dispatched('t:2', 2), 1);
    index.ingest(settled('t:1', 3, 1), 2);
    expect(index.trace('t:1')?.status).toBe('resolved');
    expect(index.trace('t:2')?.dispatchedAt).toBe(2);
    expect(index.trace('t:3')).toBeUndefined();
    expect(index.traces.map((t) => t.traceId)).toEqual(['t:1', 't:2']);
  });

  it('keeps one row for a call dispatched again under its id while pending, as a resumed run does', () => {
    const index = new RunIndex<number>();
    index.ingest(dispatched('t:1', 1), 0);
    index.ingest(dispatched('t:2', 2), 1);
    index.ingest({ type: 'tool_finished', time: 3, trace_id: 't:1', attempts: 2 }, 2);
    index.ingest(dispatched('t:1', 10), 3);
    expect(index.traces).toHaveLength(2);
    expect([...index.pending.keys()]).toEqual(['t:1', 't:2']);
    expect(index.trace('t:1')).toMatchObject({ dispatchedAt: 10, attempts: undefined });
    index.ingest(settled('t:1', 12, 1), 4);
    expect(index.settled.map((t) => t.traceId)).toEqual(['t:1']);
    expect(index.trace('t:1')).toMatchObject({ status: 'resolved', durationMs: 2 });
  });
});

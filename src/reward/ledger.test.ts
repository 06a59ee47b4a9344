import { describe, expect, it } from 'vitest';
import type { RewardSourceDefinition } from '../schema/definition.js';
import { ManualClock } from '../shared/clock.js';
import { Rng } from '../shared/rng.js';
import { RewardLedger, type RewardEvent, type StepRef } from './ledger.js';

function source(name: string, extra: Partial<RewardSourceDefinition> = {}): RewardSourceDefinition {
  return { name, schema: { type: 'number', minimum: 0, maximum: 1 }, delayMs: 200, aggregation: 'sum', weight: 1, binding: { kind: 'external' }, ...extra };
}

function ledgerWith(sources: RewardSourceDefinition[], clock = new ManualClock()): { ledger: RewardLedger; events: RewardEvent[]; clock: ManualClock } {
  const events: RewardEvent[] = [];
  const map = new Map(sources.map((s) => [s.name, s]));
  return { ledger: new RewardLedger(map, { now: () => clock.now(), emit: (e) => events.push(e) }), events, clock };
}

function step(n: number, clock: ManualClock, extra: Partial<StepRef> = {}): StepRef {
  return { traceId: `a:${n}`, instanceId: 'a', episode: 0, step: n, action: 'act', time: clock.now(), ...extra };
}

function shuffle<T>(items: T[], rng: Rng): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

describe('RewardLedger', () => {
  it('lands a delayed value on its step by trace id, by episode + step, and by event time', () => {
    const { ledger, clock } = ledgerWith([source('judge'), source('human', { delayMs: 86_400_000 })]);
    ledger.open(step(1, clock), 0.5);
    clock.advance(1_000);
    ledger.open(step(2, clock), 0);
    clock.advance(200);
    expect(ledger.deliver({ trace_id: 'a:1', source: 'judge', value: 0.25 }).outcome).toBe('arrived');
    expect(ledger.deliver({ episode: 0, step: 2, source: 'judge', value: 1 })).toMatchObject({ outcome: 'arrived', trace_id: 'a:2', reward: 1 });
    // 500 ms after step 1 settled, step 1's state was current: a reward about that moment lands there.
    expect(ledger.deliver({ episode: 0, time: clock.now() - 700, source: 'human', value: 0 }).trace_id).toBe('a:1');
    expect(ledger.deliver({ episode: 0, time: new Date(clock.now()).toISOString(), source: 'human', value: 1 }).trace_id).toBe('a:2');
    expect(ledger.entries('a:1')).toEqual({
      judge: { status: 'arrived', value: 0.25, arrived_at: clock.now(), delay_ms: 1_200 },
      human: { status: 'arrived', value: 0, arrived_at: clock.now(), delay_ms: 1_200 },
    });
    expect(ledger.reward('a:1')).toBe(0.75);
  });

  it('refuses bad deliveries with a typed error naming the field, and changes nothing', () => {
    const { ledger, clock, events } = ledgerWith([source('judge'), source('latency', { delayMs: 0, binding: { kind: 'tool' } })]);
    ledger.open(step(1, clock), 0);
    const cases: [object, string][] = [
      [{ trace_id: 'nope', source: 'judge', value: 1 }, '/trace_id'],
      [{ trace_id: 'a:1', source: 'jugde', value: 1 }, '/source'],
      [{ trace_id: 'a:1', source: 'latency', value: 1 }, '/source'],
      [{ trace_id: 'a:1', source: 'judge', value: 7 }, '/value'],
      [{ trace_id: 'a:1', source: 'judge', value: '1' }, '/value'],
      [{ episode: 3, step: 1, source: 'judge', value: 1 }, '/episode'],
      [{ episode: 0, step: 9, source: 'judge', value: 1 }, '/step'],
      [{ episode: 0, time: clock.now() - 1, source: 'judge', value: 1 }, '/time'],
      [{ source: 'judge', value: 1 }, ''],
      [{ trace_id: 'a:1', source: 'judge', value: 1, key: '' }, '/key'],
    ];
    for (const [d, pointer] of cases) {
      expect(() => ledger.deliver(d as never), JSON.stringify(d)).toThrow(expect.objectContaining({ code: 'REWARD_INVALID', issues: [expect.objectContaining({ pointer })] }));
    }
    expect(events).toEqual([]);
    expect(ledger.entries('a:1')?.['judge']?.status).toBe('pending');
  });

  it('treats a repeated key as a no-op and combines distinct keys by the source aggregation', () => {
    for (const [aggregation, expected] of [['sum', 1.5], ['mean', 0.5], ['last', 0.2], ['min', 0.2], ['max', 0.9]] as const) {
      const { ledger, clock } = ledgerWith([source('review', { aggregation })]);
      ledger.open(step(1, clock), 0);
      ledger.deliver({ trace_id: 'a:1', source: 'review', value: 0.4, key: 'r1' });
      expect(ledger.deliver({ trace_id: 'a:1', source: 'review', value: 0.4, key: 'r1' }).outcome).toBe('duplicate');
      ledger.deliver({ trace_id: 'a:1', source: 'review', value: 0.9, key: 'r2' });
      ledger.deliver({ trace_id: 'a:1', source: 'review', value: 0.2, key: 'r3' });
      expect(ledger.entries('a:1')?.['review']).toMatchObject({ value: expected, count: 3 });
    }
  });

  it('imputes the fallback at the deadline, keeps a later value as late beside it, and the basis picks', () => {
    const { ledger, clock, events } = ledgerWith([source('judge', { deadlineMs: 1_000, fallback: { value: 0.5 }, weight: 2 })]);
    ledger.open(step(1, clock), 1);
    clock.advance(999);
    expect(ledger.expire()).toBe(0);
    clock.advance(1);
    expect(ledger.expire()).toBe(1);
    expect(ledger.entries('a:1')?.['judge']).toMatchObject({ status: 'fallback', value: 0.5, imputed: { value: 0.5, strategy: 'value' } });
    clock.advance(5_000);
    expect(ledger.deliver({ trace_id: 'a:1', source: 'judge', value: 0.9 }).outcome).toBe('late');
    expect(ledger.entries('a:1')?.['judge']).toMatchObject({ status: 'late', value: 0.5, late_value: 0.9, delay_ms: 6_000 });
    expect(ledger.reward('a:1', 'final')).toBe(2);
    expect(ledger.reward('a:1', 'arrived')).toBeCloseTo(2.8);
    expect(events.map((e) => e.type)).toEqual(['reward_imputed', 'reward_late']);
  });

  it('imputes the historical mean of the same source and action, with its sample size', () => {
    const { ledger, clock } = ledgerWith([source('judge', { deadlineMs: 100, fallback: { strategy: 'historical_mean' } })]);
    ledger.open(step(1, clock), 0);
    ledger.open(step(2, clock), 0);
    ledger.open(step(3, clock, { action: 'other' }), 0);
    ledger.open(step(4, clock), 0);
    ledger.deliver({ trace_id: 'a:1', source: 'judge', value: 0.2 });
    ledger.deliver({ trace_id: 'a:2', source: 'judge', value: 0.6 });
    clock.advance(100);
    ledger.expire();
    expect(ledger.entries('a:4')?.['judge']).toMatchObject({ status: 'fallback', imputed: { value: 0.4, strategy: 'historical_mean', sample_size: 2 } });
    // No history for 'other': nothing to impute; a value after the deadline is late.
    expect(ledger.entries('a:3')?.['judge']?.status).toBe('pending');
    expect(ledger.deliver({ trace_id: 'a:3', source: 'judge', value: 1 }).outcome).toBe('late');
    expect(ledger.entries('a:3')?.['judge']).toMatchObject({ status: 'late', value: 1 });
  });

  it('applies a source failure as its fallback, or as failed without one', () => {
    const { ledger, clock } = ledgerWith([source('a', { fallback: { value: 0 } }), source('b')]);
    ledger.open(step(1, clock), 0);
    ledger.fail('a:1', 'a', 'HTTP 500');
    ledger.fail('a:1', 'b', 'HTTP 500');
    expect(ledger.entries('a:1')).toMatchObject({ a: { status: 'fallback', value: 0 }, b: { status: 'failed', value: null, error: 'HTTP 500' } });
    expect(ledger.counts()['b']).toMatchObject({ expected: 1, failed: 1, pending: 0 });
  });

  it('handles 200 ms, 1 h and 24 h delays, each deadline applied once, when due', () => {
    const day = 86_400_000;
    const { ledger, clock } = ledgerWith([
      source('judge', { delayMs: 200, deadlineMs: 1_000, fallback: { value: 0 } }),
      source('metric', { delayMs: 3_600_000, deadlineMs: 2 * 3_600_000, fallback: { value: 0 } }),
      source('human', { delayMs: day, deadlineMs: 2 * day, fallback: { value: 0 } }),
    ]);
    for (let i = 1; i <= 100; i++) ledger.open(step(i, clock), 0);
    clock.advance(200);
    for (let i = 1; i <= 100; i++) ledger.deliver({ trace_id: `a:${i}`, source: 'judge', value: 1 });
    clock.advance(3_600_000);
    for (let i = 1; i <= 50; i++) ledger.deliver({ trace_id: `a:${i}`, source: 'metric', value: 1 });
    clock.advance(3_600_000);
    expect(ledger.expire()).toBe(50);
    clock.advance(day);
    for (let i = 1; i <= 99; i++) ledger.deliver({ trace_id: `a:${i}`, source: 'human', value: 0.5 });
    clock.advance(day);
    expect(ledger.expire()).toBe(1);
    const sla = ledger.sla();
    expect(sla['judge']).toMatchObject({ expected: 100, arrived: 100, share_within_deadline: 1, latency_ms: { p50: 200, p99: 200 } });
    expect(sla['metric']).toMatchObject({ arrived: 50, fallback: 50, share_imputed: 0.5, latency_ms: { p50: 3_600_200 } });
    expect(sla['human']).toMatchObject({ arrived: 99, fallback: 1, pending: 0 });
  });

  it('lands every value on the right step with the right status in 500 random arrival orders with duplicates', () => {
    for (let trial = 0; trial < 500; trial++) {
      const rng = new Rng(trial);
      const clock = new ManualClock();
      const { ledger } = ledgerWith([source('judge', { deadlineMs: 500, fallback: { value: 0 } }), source('human', { aggregation: 'max' })], clock);
      const steps = 1 + rng.int(0, 8);
      for (let i = 1; i <= steps; i++) {
        ledger.open(step(i, clock, { episode: 0 }), 0);
        clock.advance(rng.int(1, 50)); // all steps within the judge's 500 ms deadline of the first
      }
      // What each step must end with: judge arrives in time for some, late or never for others; human from 0–3 reviewers.
      type Plan = { trace: string; source: string; value: number; key?: string; at: number };
      const plans: Plan[] = [];
      const expected = new Map<string, { judge: string; human: number | null }>();
      const t0 = clock.now();
      for (let i = 1; i <= steps; i++) {
        const trace = `a:${i}`;
        const judgeFate = rng.pick(['in-time', 'late', 'never'] as const);
        const judgeValue = rng.int(0, 10) / 10;
        if (judgeFate !== 'never') plans.push({ trace, source: 'judge', value: judgeValue, at: judgeFate === 'in-time' ? 0 : 10_000 });
        const reviewers = rng.int(0, 3);
        let best: number | null = null;
        for (let r = 0; r < reviewers; r++) {
          const v = rng.int(0, 10) / 10;
          best = best === null ? v : Math.max(best, v);
          plans.push({ trace, source: 'human', value: v, key: `r${r}`, at: rng.int(0, 20_000) });
        }
        expected.set(trace, { judge: judgeFate === 'in-time' ? 'arrived' : judgeFate === 'late' ? 'late' : 'fallback', human: best });
      }
      // Every delivery sent twice (at-least-once delivery), in a shuffled order within its time slot.
      const sends = shuffle([...plans, ...plans], rng).sort((a, b) => a.at - b.at);
      let duplicates = 0;
      for (const p of sends) {
        const due = t0 + p.at;
        if (clock.now() < due) clock.advance(due - clock.now());
        ledger.expire();
        const r = ledger.deliver({ trace_id: p.trace, source: p.source, value: p.value, ...(p.key ? { key: p.key } : {}) });
        if (r.outcome === 'duplicate') duplicates++;
      }
      clock.advance(30_000);
      ledger.expire();
      expect(duplicates).toBe(plans.length);
      for (const [trace, want] of expected) {
        const e = ledger.entries(trace);
        expect(e?.['judge']?.status, `trial ${trial} ${trace}`).toBe(want.judge);
        expect(e?.['human']?.value ?? null, `trial ${trial} ${trace}`).toBe(want.human);
      }
    }
  });

  it('replays a logged event stream into the same entries, without emitting again', () => {
    const { ledger, clock, events } = ledgerWith([source('judge', { deadlineMs: 100, fallback: { value: 0 } }), source('human')]);
    ledger.open(step(1, clock), 0);
    ledger.open(step(2, clock), 0);
    ledger.deliver({ trace_id: 'a:1', source: 'human', value: 1, key: 'x' });
    clock.advance(100);
    ledger.expire();
    ledger.deliver({ trace_id: 'a:2', source: 'judge', value: 0.3 });
    const copy = ledgerWith([source('judge', { deadlineMs: 100, fallback: { value: 0 } }), source('human')], clock);
    copy.ledger.open(step(1, clock, { time: clock.now() - 100 }), 0);
    copy.ledger.open(step(2, clock, { time: clock.now() - 100 }), 0);
    for (const e of events) copy.ledger.replay(e);
    expect(copy.events).toEqual([]);
    for (const t of ['a:1', 'a:2']) expect(copy.ledger.entries(t)).toEqual(ledger.entries(t));
    expect(copy.ledger.deliver({ trace_id: 'a:1', source: 'human', value: 1, key: 'x' }).outcome).toBe('duplicate');
    expect(copy.ledger.expire()).toBe(0);
  });

  it('keeps the steps of the last retainEpisodes ended episodes whose rewards are final, and the returns of those it dropped', () => {
    const clock = new ManualClock();
    const ledger = new RewardLedger(new Map([['judge', source('judge')]]), { now: () => clock.now(), retainEpisodes: 2 });
    const at = (episode: number, n: number): StepRef => ({ traceId: `ep-${episode}:${n}`, instanceId: `ep-${episode}`, episode, step: n, action: 'act', time: clock.now() });
    for (let e = 0; e < 5; e++) {
      ledger.open(at(e, 1), 1);
      ledger.open(at(e, 2), 0);
      // Episode 1's second verdict never comes: not final, it is kept whatever its age.
      ledger.deliver({ trace_id: `ep-${e}:1`, source: 'judge', value: 0.5 });
      if (e !== 1) ledger.deliver({ trace_id: `ep-${e}:2`, source: 'judge', value: 0.25 });
      ledger.episodeEnded(`ep-${e}`, e);
    }
    // Two ended episodes held: the newest, and episode 1 (pending), which is passed over for dropping.
    expect([...ledger.steps()].map((r) => r.traceId)).toEqual(['ep-1:1', 'ep-1:2', 'ep-4:1', 'ep-4:2']);
    expect([...ledger.droppedReturns()]).toEqual([[0, 1.75], [2, 1.75], [3, 1.75]]);
    // A value for a dropped step is refused like one for a step never seen; episode 1's still lands.
    expect(() => ledger.deliver({ trace_id: 'ep-0:2', source: 'judge', value: 1 })).toThrow(/ep-0:2/);
    expect(ledger.deliver({ trace_id: 'ep-1:2', source: 'judge', value: 1 }).outcome).toBe('arrived');
    // Final now: the next episode's end drops it (the oldest past the limit).
    ledger.open(at(5, 1), 0);
    ledger.deliver({ trace_id: 'ep-5:1', source: 'judge', value: 0 });
    ledger.episodeEnded('ep-5', 5);
    expect(ledger.droppedReturns().get(1)).toBe(2.5);
    expect([...ledger.steps()].map((r) => r.traceId)).toEqual(['ep-4:1', 'ep-4:2', 'ep-5:1']);
  });
});

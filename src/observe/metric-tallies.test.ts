import * as prom from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Tally, TallyHistogram } from './metric-tallies.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];

describe('metric tallies', () => {
  it('renders a histogram as prom-client renders its own for the same values, bounds included', async () => {
    const ours = new prom.Registry();
    const theirs = new prom.Registry();
    const tally = new TallyHistogram('t_seconds', 'A duration.', BUCKETS);
    ours.registerMetric(tally.asMetric());
    const reference = new prom.Histogram({ name: 't_seconds', help: 'A duration.', labelNames: ['run_id', 'tool'], buckets: BUCKETS, registers: [theirs] });
    const values = [0, 0.001, 0.0011, 0.01, 0.05, 0.1, 1, 1.5, 30];
    for (const [i, v] of values.entries()) {
      const tool = i % 2 === 0 ? 'a' : 'b "quoted"';
      tally.observe(`r\0${tool}`, () => ({ run_id: 'r', tool }), v);
      reference.observe({ run_id: 'r', tool }, v);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    // The JSON the OTLP push reads: the same series, labels and values (prom-client adds an empty exemplar to each bucket).
    const series = async (r: prom.Registry): Promise<unknown> => (await r.getMetricsAsJSON()).map((m) => ({ ...m, values: m.values.map((v) => ({ labels: v.labels, value: v.value, metricName: (v as { metricName?: string }).metricName })) }));
    expect(await series(ours)).toEqual(await series(theirs));
    ours.resetMetrics();
    expect(await ours.metrics()).toBe('# HELP t_seconds A duration.\n# TYPE t_seconds histogram\n');
  });

  it('hands a counter what was added since it last collected, and a gauge its values', async () => {
    const registry = new prom.Registry();
    const steps = new Tally();
    const inFlight = new Tally();
    new prom.Counter({ name: 'steps_total', help: 'Steps.', labelNames: ['status'], registers: [registry], collect() { steps.incInto(this); } });
    new prom.Gauge({ name: 'in_flight', help: 'In flight.', labelNames: ['run_id'], registers: [registry], collect() { inFlight.setInto(this); } });
    let built = 0;
    const add = (status: string): void => steps.add(status, () => (built++, { status }));
    add('ok');
    add('ok');
    add('failed');
    inFlight.add('r', () => ({ run_id: 'r' }), 3);
    inFlight.add('r', () => ({ run_id: 'r' }), -1);
    const sample = async (name: string, labels: string): Promise<string | undefined> => (await registry.metrics()).split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
    expect(await sample('steps_total', 'status="ok"')).toBe('steps_total{status="ok"} 2');
    expect(await sample('in_flight', 'run_id="r"')).toBe('in_flight{run_id="r"} 2');
    add('ok');
    inFlight.add('r', () => ({ run_id: 'r' }), -2);
    // Scraped twice: the counter stays cumulative (the difference was handed, not the total again).
    expect(await sample('steps_total', 'status="ok"')).toBe('steps_total{status="ok"} 3');
    expect(await sample('steps_total', 'status="ok"')).toBe('steps_total{status="ok"} 3');
    expect(await sample('steps_total', 'status="failed"')).toBe('steps_total{status="failed"} 1');
    expect(await sample('in_flight', 'run_id="r"')).toBe('in_flight{run_id="r"} 0');
    // A label set is built once, however many updates it takes.
    expect(built).toBe(2);
  });
});

/**
 * Metrics updated at every step, counted by us and handed to prom-client only when it collects
 * (a scrape, an OTLP push). prom-client hashes and checks a label object on every update (~0.5–1 µs
 * each); a served step made five such updates, about 5 % of the server's CPU for it. Here a step's
 * update is a lookup by a key its caller already has, and the label object is built once per set.
 */
import type { Counter, Gauge, Histogram, LabelValues } from 'prom-client';

type Labels = LabelValues<string>;

interface Tallied {
  readonly labels: Labels;
  value: number;
  /** What the metric was last handed (a counter takes the difference). */
  handed: number;
}

/** Values by label set, handed to a counter (what was added since) or a gauge (as they stand) when it collects. */
export class Tally {
  readonly #sets = new Map<string, Tallied>();

  /** `key` names the label set (one key per set); `labels` builds it, the first time only. */
  add(key: string, labels: () => Labels, by = 1): void {
    const set = this.#sets.get(key);
    if (set) set.value += by;
    else this.#sets.set(key, { labels: labels(), value: by, handed: 0 });
  }

  /** In a counter's `collect`. */
  incInto(counter: Counter): void {
    for (const set of this.#sets.values()) {
      if (set.value === set.handed) continue;
      counter.inc(set.labels, set.value - set.handed);
      set.handed = set.value;
    }
  }

  /** In a gauge's `collect`. */
  setInto(gauge: Gauge): void {
    for (const set of this.#sets.values()) gauge.set(set.labels, set.value);
  }
}

interface Observed {
  readonly labels: Labels;
  /** Per bucket (the last is +Inf), not cumulative. */
  readonly counts: number[];
  sum: number;
  count: number;
}

interface HistogramData<V> {
  readonly name: string;
  readonly help: string;
  readonly type: 'histogram';
  readonly aggregator: 'sum';
  readonly values: V[];
}

/**
 * A histogram kept by us, in the shape prom-client's registry renders and its JSON gives (the
 * `_bucket` series cumulative by `le`, then `_sum` and `_count`), registered as a metric of its own.
 */
export class TallyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #sets = new Map<string, Observed>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
  ) {}

  observe(key: string, labels: () => Labels, value: number): void {
    let set = this.#sets.get(key);
    if (!set) this.#sets.set(key, (set = { labels: labels(), counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 }));
    // A bucket holds values up to and including its bound, as Prometheus's `le` says.
    let i = 0;
    while (i < this.buckets.length && value > (this.buckets[i] as number)) i++;
    (set.counts[i] as number)++;
    set.sum += value;
    set.count++;
  }

  /** What prom-client's registry renders: each series' own label (`le`) apart from its set's, in prom-client's order. */
  getForPromString(): Promise<HistogramData<{ labels: Labels; sharedLabels: Labels; value: number; metricName: string }>> {
    const values: { labels: Labels; sharedLabels: Labels; value: number; metricName: string }[] = [];
    for (const set of this.#sets.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.buckets.length; i++) {
        cumulative += set.counts[i] as number;
        values.push({ labels: { le: this.buckets[i] ?? '+Inf' }, sharedLabels: set.labels, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: {}, sharedLabels: set.labels, value: set.sum, metricName: `${this.name}_sum` }, { labels: {}, sharedLabels: set.labels, value: set.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** prom-client's `Metric.get()` (its registry's JSON, which the OTLP push sends): each series' labels in one object. */
  async get(): Promise<HistogramData<{ labels: Labels; value: number; metricName: string }>> {
    const data = await this.getForPromString();
    return { ...data, values: data.values.map(({ labels, sharedLabels, value, metricName }) => ({ labels: { ...labels, ...sharedLabels }, value, metricName })) };
  }

  /** What prom-client's registry calls on `resetMetrics()`. */
  reset(): void {
    this.#sets.clear();
  }

  /** As the registry takes it: it reads only what is above (`getForPromString`, `get`, `name`, `reset`). */
  asMetric(): Histogram {
    return this as unknown as Histogram;
  }
}

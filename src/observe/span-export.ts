/**
 * Ended spans to an exporter in batches, from a bounded queue, one export at a time.
 *
 * The SDK's BatchSpanProcessor does the same but drops what overflows without a count; a run must
 * say how many spans never reached the collector (summary.json `traces`). A collector that is down
 * or slow never holds up the run: spans wait in the queue while one export is out, and what does
 * not fit is dropped and counted, as is every span of a failed export and whatever is still queued
 * when `finish` runs out of time.
 */
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { raceAbort } from '../shared/abort.js';

/** Why spans or a push were given up at the run's end: the exporter retries refusals and 5xx itself, so "no answer" may be a collector that kept saying no. */
export const UNFINISHED_EXPORT = 'no export had succeeded when the run ended (the collector refused, failed or was too slow, and the exporter was still retrying)';

export interface SpanExportOptions {
  /** Spans held at most while waiting for export (OTEL_BSP_MAX_QUEUE_SIZE, default 2048). */
  readonly maxQueue?: number;
  /** Spans per export (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 512). */
  readonly batch?: number;
  /** How long a partial batch waits for more (OTEL_BSP_SCHEDULE_DELAY, default 1000 ms). */
  readonly delayMs?: number;
}

export interface SpanExportStats {
  readonly exported: number;
  readonly dropped: number;
  /** Why the last export failed, if one did. */
  readonly error?: string;
}

export class BoundedSpanExport implements SpanProcessor {
  readonly #exporter: SpanExporter;
  readonly #maxQueue: number;
  readonly #batch: number;
  readonly #delayMs: number;
  #queue: ReadableSpan[] = [];
  #inFlight: Promise<void> | undefined;
  /** Spans of the export out, and which export that is (bumped when `finish` abandons it). */
  #pendingInFlight = 0;
  #generation = 0;
  #timer: NodeJS.Timeout | undefined;
  #exported = 0;
  #dropped = 0;
  #error: string | undefined;
  #closed = false;

  constructor(exporter: SpanExporter, options: SpanExportOptions = {}) {
    this.#exporter = exporter;
    this.#maxQueue = options.maxQueue ?? 2048;
    this.#batch = Math.min(options.batch ?? 512, this.#maxQueue);
    this.#delayMs = options.delayMs ?? 1000;
  }

  get stats(): SpanExportStats {
    return { exported: this.#exported, dropped: this.#dropped, ...(this.#error !== undefined ? { error: this.#error } : {}) };
  }

  onStart(_span: Span): void {
    // Spans are built whole from events: nothing to do when one starts.
  }

  onEnd(span: ReadableSpan): void {
    if (this.#closed || this.#queue.length >= this.#maxQueue) {
      this.#dropped++;
      return;
    }
    this.#queue.push(span);
    this.#schedule();
  }

  /** Exports what is queued now. */
  async forceFlush(): Promise<void> {
    while (this.#queue.length > 0 || this.#inFlight) await (this.#inFlight ?? this.#exportBatch());
  }

  async shutdown(): Promise<void> {
    await this.finish(AbortSignal.timeout(5_000));
  }

  /**
   * Exports what is queued, until `signal` aborts; then stops. What was not exported by then
   * is counted as dropped (an export still out is abandoned, not awaited).
   */
  async finish(signal: AbortSignal): Promise<SpanExportStats> {
    if (!this.#closed) {
      this.#closed = true;
      clearTimeout(this.#timer);
      await raceAbort(this.forceFlush(), signal).catch(() => undefined);
      const abandoned = this.#inFlight !== undefined;
      if (abandoned) {
        this.#generation++;
        this.#dropped += this.#pendingInFlight;
        this.#error = UNFINISHED_EXPORT;
        this.#inFlight = undefined;
      }
      this.#dropped += this.#queue.length;
      this.#queue = [];
      // The exporter's shutdown waits for the export still out (up to its own timeout): not the run's business.
      const shutdown = this.#exporter.shutdown().catch(() => undefined);
      if (!abandoned) await shutdown;
    }
    return this.stats;
  }

  #schedule(): void {
    if (this.#inFlight) return;
    if (this.#queue.length >= this.#batch) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      void this.#exportBatch();
    } else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        void this.#exportBatch();
      }, this.#delayMs);
      // Waiting spans never keep a finished process alive: `finish` exports them.
      this.#timer.unref();
    }
  }

  #exportBatch(): Promise<void> {
    if (this.#inFlight) return this.#inFlight;
    const spans = this.#queue.splice(0, this.#batch);
    if (spans.length === 0) return Promise.resolve();
    const generation = this.#generation;
    this.#pendingInFlight = spans.length;
    const done = new Promise<ExportResult>((resolve) => {
      try {
        this.#exporter.export(spans, resolve);
      } catch (err) {
        resolve({ code: ExportResultCode.FAILED, error: err instanceof Error ? err : new Error('the exporter threw') });
      }
    }).then((result) => {
      // `finish` gave up on this export and counted its spans already.
      if (generation !== this.#generation) return;
      this.#inFlight = undefined;
      this.#pendingInFlight = 0;
      if (result.code === ExportResultCode.SUCCESS) this.#exported += spans.length;
      else {
        this.#dropped += spans.length;
        this.#error = result.error?.message ?? 'the collector refused the export';
      }
      if (!this.#closed && this.#queue.length > 0) this.#schedule();
    });
    this.#inFlight = done;
    return done;
  }
}

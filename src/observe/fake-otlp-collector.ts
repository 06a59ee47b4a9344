/**
 * An OTLP/HTTP receiver for tests: takes `POST /v1/traces` (protobuf or JSON) and `POST /v1/metrics`
 * (protobuf), as a collector does, and keeps the spans and metric points decoded. The protobuf is read by a wire-format reader of its
 * own (not the exporter's generated code), so a test checks what went over the wire, not what the
 * exporter meant to send. It can also refuse every export, as a collector that is unwell.
 * Not shipped in the package.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttributeValue = string | number | boolean | readonly AttributeValue[];

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  /** Unix nanoseconds, as bigint (they do not fit a double). */
  readonly start: bigint;
  readonly end: bigint;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly events: readonly { readonly name: string; readonly time: bigint; readonly attributes: Readonly<Record<string, AttributeValue>> }[];
  readonly links: readonly { readonly traceId: string; readonly spanId: string; readonly attributes: Readonly<Record<string, AttributeValue>> }[];
  /** 0 unset, 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message: string };
  readonly resource: Readonly<Record<string, AttributeValue>>;
  readonly scope: string;
}

/** A metric point as pushed: a sum or gauge value, or a histogram's count, sum and per-bucket counts. */
export interface ReceivedPoint {
  readonly metric: string;
  readonly kind: 'sum' | 'gauge' | 'histogram';
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly value?: number;
  readonly count?: number;
  readonly sum?: number;
  readonly bounds?: readonly number[];
  readonly buckets?: readonly number[];
  readonly resource: Readonly<Record<string, AttributeValue>>;
}

export interface FakeCollectorOptions {
  /** Answer every request with this status (a collector that refuses: 400 is not retried, 503 is). */
  readonly status?: number;
}

export class FakeOtlpCollector implements AsyncDisposable {
  readonly spans: ReceivedSpan[] = [];
  /** Metric points, every push's, in order. */
  readonly points: ReceivedPoint[] = [];
  /** The content type of every request, in order. */
  readonly contentTypes: string[] = [];
  /** The Authorization header of each request (empty when it had none). */
  readonly authorizations: string[] = [];
  readonly #server: Server;
  readonly #options: FakeCollectorOptions;

  private constructor(server: Server, options: FakeCollectorOptions) {
    this.#server = server;
    this.#options = options;
  }

  static async start(options: FakeCollectorOptions = {}): Promise<FakeOtlpCollector> {
    const server = createServer();
    const collector = new FakeOtlpCollector(server, options);
    server.on('request', (req, res) => void collector.#handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return collector;
  }

  /** The base URL (what OTEL_EXPORTER_OTLP_ENDPOINT takes). */
  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const type = req.headers['content-type'] ?? '';
    this.contentTypes.push(type);
    this.authorizations.push(req.headers.authorization ?? '');
    if (req.method !== 'POST' || (req.url !== '/v1/traces' && req.url !== '/v1/metrics')) {
      res.writeHead(404).end();
      return;
    }
    if (this.#options.status !== undefined) {
      res.writeHead(this.#options.status).end();
      return;
    }
    const body = Buffer.concat(chunks);
    try {
      if (req.url === '/v1/metrics') this.points.push(...metricsFromProtobuf(body));
      else this.spans.push(...(type.startsWith('application/json') ? fromJson(JSON.parse(body.toString('utf8')) as JsonRequest) : fromProtobuf(body)));
    } catch (err) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err));
      return;
    }
    res.writeHead(200, { 'content-type': type.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' }).end(type.startsWith('application/json') ? '{}' : undefined);
  }
}

// ---------------------------------------------------------------- protobuf wire format

type Field = bigint | Buffer;

/** A message as field number → values (varints and fixed64 as bigint, fixed32 as bigint, bytes as Buffer). */
function fields(buf: Buffer): Map<number, Field[]> {
  const out = new Map<number, Field[]>();
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++];
      if (b === undefined) throw new Error('truncated varint');
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const field = key >>> 3;
    let value: Field;
    switch (key & 7) {
      case 0:
        value = varint();
        break;
      case 1:
        value = buf.readBigUInt64LE(i);
        i += 8;
        break;
      case 2: {
        const len = Number(varint());
        value = buf.subarray(i, i + len);
        i += len;
        break;
      }
      case 5:
        value = BigInt(buf.readUInt32LE(i));
        i += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${key & 7}`);
    }
    const list = out.get(field) ?? [];
    list.push(value);
    out.set(field, list);
  }
  return out;
}

const bytesOf = (m: Map<number, Field[]>, n: number): Buffer[] => (m.get(n) ?? []).filter((v): v is Buffer => Buffer.isBuffer(v));
const bufferOf = (m: Map<number, Field[]>, n: number): Buffer => bytesOf(m, n)[0] ?? Buffer.alloc(0);
const numberOf = (m: Map<number, Field[]>, n: number): bigint => {
  const v = m.get(n)?.[0];
  return typeof v === 'bigint' ? v : 0n;
};

function anyValue(buf: Buffer): AttributeValue {
  const m = fields(buf);
  if (m.has(1)) return bufferOf(m, 1).toString('utf8');
  if (m.has(2)) return numberOf(m, 2) !== 0n;
  if (m.has(3)) return Number(BigInt.asIntN(64, numberOf(m, 3)));
  if (m.has(4)) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(numberOf(m, 4));
    return b.readDoubleLE(0);
  }
  if (m.has(5)) return bytesOf(fields(bufferOf(m, 5)), 1).map(anyValue);
  return '';
}

function attributes(list: readonly Buffer[]): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of list) {
    const m = fields(kv);
    Object.defineProperty(out, bufferOf(m, 1).toString('utf8'), { value: anyValue(bufferOf(m, 2)), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of bytesOf(fields(body), 1)) {
    const r = fields(rs);
    const resource = attributes(bytesOf(fields(bufferOf(r, 1)), 1));
    for (const ss of bytesOf(r, 2)) {
      const s = fields(ss);
      const scope = bufferOf(fields(bufferOf(s, 1)), 1).toString('utf8');
      for (const sp of bytesOf(s, 2)) {
        const m = fields(sp);
        const status = fields(bufferOf(m, 15));
        spans.push({
          traceId: bufferOf(m, 1).toString('hex'),
          spanId: bufferOf(m, 2).toString('hex'),
          parentSpanId: bufferOf(m, 4).toString('hex'),
          name: bufferOf(m, 5).toString('utf8'),
          kind: Number(numberOf(m, 6)),
          start: numberOf(m, 7),
          end: numberOf(m, 8),
          attributes: attributes(bytesOf(m, 9)),
          events: bytesOf(m, 11).map((e) => {
            const ev = fields(e);
            return { time: numberOf(ev, 1), name: bufferOf(ev, 2).toString('utf8'), attributes: attributes(bytesOf(ev, 3)) };
          }),
          links: bytesOf(m, 13).map((l) => {
            const lk = fields(l);
            return { traceId: bufferOf(lk, 1).toString('hex'), spanId: bufferOf(lk, 2).toString('hex'), attributes: attributes(bytesOf(lk, 4)) };
          }),
          status: { code: Number(numberOf(status, 3)), message: bufferOf(status, 2).toString('utf8') },
          resource,
          scope,
        });
      }
    }
  }
  return spans;
}

/** ExportMetricsServiceRequest: resource metrics → scope metrics → metrics (gauge 5, sum 7, histogram 9). */
function metricsFromProtobuf(body: Buffer): ReceivedPoint[] {
  const points: ReceivedPoint[] = [];
  const double = (v: bigint): number => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(v);
    return b.readDoubleLE(0);
  };
  const packed = (buf: Buffer, read: (b: Buffer, i: number) => number): number[] => Array.from({ length: buf.length / 8 }, (_, i) => read(buf, i * 8));
  for (const rm of bytesOf(fields(body), 1)) {
    const r = fields(rm);
    const resource = attributes(bytesOf(fields(bufferOf(r, 1)), 1));
    for (const sm of bytesOf(r, 2)) {
      for (const mm of bytesOf(fields(sm), 2)) {
        const m = fields(mm);
        const metric = bufferOf(m, 1).toString('utf8');
        for (const [field, kind] of [[5, 'gauge'], [7, 'sum']] as const) {
          for (const p of m.has(field) ? bytesOf(fields(bufferOf(m, field)), 1) : []) {
            const dp = fields(p);
            const value = dp.has(4) ? double(numberOf(dp, 4)) : Number(BigInt.asIntN(64, numberOf(dp, 6)));
            points.push({ metric, kind, attributes: attributes(bytesOf(dp, 7)), value, resource });
          }
        }
        for (const p of m.has(9) ? bytesOf(fields(bufferOf(m, 9)), 1) : []) {
          const dp = fields(p);
          points.push({ metric, kind: 'histogram', attributes: attributes(bytesOf(dp, 9)), count: Number(numberOf(dp, 4)), sum: double(numberOf(dp, 5)), buckets: packed(bufferOf(dp, 6), (b, i) => Number(b.readBigUInt64LE(i))), bounds: packed(bufferOf(dp, 7), (b, i) => b.readDoubleLE(i)), resource });
        }
      }
    }
  }
  return points;
}

// ---------------------------------------------------------------- OTLP/JSON

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
}
type JsonAttributes = { key: string; value: JsonAnyValue }[] | undefined;
interface JsonRequest {
  resourceSpans?: {
    resource?: { attributes?: JsonAttributes };
    scopeSpans?: {
      scope?: { name?: string };
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        startTimeUnixNano: string | number;
        endTimeUnixNano: string | number;
        attributes?: JsonAttributes;
        events?: { timeUnixNano: string | number; name: string; attributes?: JsonAttributes }[];
        links?: { traceId: string; spanId: string; attributes?: JsonAttributes }[];
        status?: { code?: number; message?: string };
      }[];
    }[];
  }[];
}

function jsonValue(v: JsonAnyValue): AttributeValue {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(jsonValue);
  return '';
}

function jsonAttributes(list: JsonAttributes): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) Object.defineProperty(out, key, { value: jsonValue(value), enumerable: true, writable: true, configurable: true });
  return out;
}

function fromJson(body: JsonRequest): ReceivedSpan[] {
  return (body.resourceSpans ?? []).flatMap((rs) =>
    (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
        kind: s.kind ?? 0,
        start: BigInt(s.startTimeUnixNano),
        end: BigInt(s.endTimeUnixNano),
        attributes: jsonAttributes(s.attributes),
        events: (s.events ?? []).map((e) => ({ name: e.name, time: BigInt(e.timeUnixNano), attributes: jsonAttributes(e.attributes) })),
        links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId, attributes: jsonAttributes(l.attributes) })),
        status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
        resource: jsonAttributes(rs.resource?.attributes),
        scope: ss.scope?.name ?? '',
      })),
    ),
  );
}

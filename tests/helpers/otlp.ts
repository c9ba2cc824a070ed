import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

// An OTLP/HTTP receiver for tests, on loopback: it keeps every export as it arrived (headers, raw bytes) and,
// for OTLP/JSON, the spans flattened (service, ids, parent, name, kind, attributes, events, links, status).

/** One span as a test reads it. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  links: { traceId: string; spanId: string }[];
  status: { code?: number; message?: string };
  /** Nanoseconds since the epoch, as a string (OTLP/JSON's form). */
  start: string;
  end: string;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};
type KeyValue = { key: string; value: AnyValue };

function plain(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(plain);
  return undefined;
}

const record = (kvs: KeyValue[] | undefined) =>
  Object.fromEntries((kvs ?? []).map((kv) => [kv.key, plain(kv.value)]));

/** The spans of one OTLP/JSON export body. */
export function spansOf(body: string): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  const doc = JSON.parse(body) as {
    resourceSpans?: {
      resource?: { attributes?: KeyValue[] };
      scopeSpans?: { spans?: Record<string, unknown>[] }[];
    }[];
  };
  for (const rs of doc.resourceSpans ?? []) {
    const service = String(record(rs.resource?.attributes)['service.name']);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        const parent = s.parentSpanId as string | undefined;
        out.push({
          service,
          traceId: String(s.traceId),
          spanId: String(s.spanId),
          parentSpanId: parent ? parent : undefined,
          name: String(s.name),
          kind: Number(s.kind),
          attributes: record(s.attributes as KeyValue[]),
          events: ((s.events as { name: string; attributes?: KeyValue[] }[]) ?? []).map((e) => ({
            name: e.name,
            attributes: record(e.attributes),
          })),
          links: ((s.links as { traceId: string; spanId: string }[]) ?? []).map((l) => ({
            traceId: l.traceId,
            spanId: l.spanId,
          })),
          status: (s.status as ReceivedSpan['status']) ?? {},
          start: String(s.startTimeUnixNano ?? '0'),
          end: String(s.endTimeUnixNano ?? '0'),
        });
      }
    }
  }
  return out;
}

/** A receiver on 127.0.0.1: `url` is what OTEL_EXPORTER_OTLP_ENDPOINT takes. */
export async function startOtlpReceiver() {
  const exports: { path: string; headers: IncomingHttpHeaders; body: Buffer }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      exports.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      const json = String(req.headers['content-type']).includes('json');
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(json ? '{}' : '');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    /** Every span received so far (OTLP/JSON exports). */
    spans: (): ReceivedSpan[] =>
      exports
        .filter((e) => String(e.headers['content-type']).includes('json'))
        .flatMap((e) => spansOf(e.body.toString('utf8'))),
    /** Every byte received so far. */
    bytes: () => Buffer.concat(exports.map((e) => e.body)),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** The span trees of `spans`, one line per span (service, name, a few attributes), children indented. */
export function spanTree(spans: readonly ReceivedSpan[], show: readonly string[] = []): string {
  const byParent = new Map<string, ReceivedSpan[]>();
  const ids = new Set(spans.map((s) => s.spanId));
  const roots: ReceivedSpan[] = [];
  for (const s of spans) {
    if (s.parentSpanId && ids.has(s.parentSpanId)) {
      const list = byParent.get(s.parentSpanId) ?? [];
      list.push(s);
      byParent.set(s.parentSpanId, list);
    } else roots.push(s);
  }
  // In the order they started (exports arrive in batches, in no useful order). A span's start is the
  // millisecond it began (the SDK takes Date.now()), so two that began in one millisecond — a call made in
  // the same process and the step after it — are told apart by their ends: the one before ended first.
  const byStart = (a: ReceivedSpan, b: ReceivedSpan) => {
    const [as, bs] = [BigInt(a.start), BigInt(b.start)];
    if (as !== bs) return as < bs ? -1 : 1;
    return BigInt(a.end) <= BigInt(b.end) ? -1 : 1;
  };
  roots.sort(byStart);
  for (const list of byParent.values()) list.sort(byStart);
  const lines: string[] = [];
  const walk = (s: ReceivedSpan, depth: number) => {
    const attrs = show
      .filter((k) => s.attributes[k] !== undefined)
      .map((k) => `${k}=${JSON.stringify(s.attributes[k])}`);
    const link = s.links.length > 0 ? ` (linked to trace ${s.links[0].traceId.slice(0, 8)}…)` : '';
    lines.push(
      `${'  '.repeat(depth)}${s.name} [${s.service}]${link}${attrs.length ? ` ${attrs.join(' ')}` : ''}`,
    );
    for (const c of byParent.get(s.spanId) ?? []) walk(c, depth + 1);
  };
  for (const r of roots) {
    lines.push(`trace ${r.traceId.slice(0, 8)}…`);
    walk(r, 1);
  }
  return lines.join('\n');
}

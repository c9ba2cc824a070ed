import os from 'node:os';
import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  DiagLogLevel,
  diag,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';

// OpenTelemetry traces (OTLP over HTTP), off unless an OTLP endpoint is configured (lib/config/config.ts: the
// standard OTEL_* variables). Each service has a tracer provider of its own, so the three services of one
// process are three services in a trace viewer. The SDK is loaded only when tracing is on: off, every helper
// here returns at its first line (the figure is in BENCHMARKS.md).
//
// The span and attribute names are in trace-names.ts (re-exported here).
import { GENAI } from './trace-names.ts';

export { GENAI, MCP, TOOLSHIFT } from './trace-names.ts';

/** Where tracing's own warnings go (the service's logger). */
interface WarnLog {
  warn(detail: object, message: string): void;
}

/** Which spans a sampler keeps: the standard OTEL_TRACES_SAMPLER names. */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof SAMPLERS)[number];

/** Tracing as configured (lib/config/config.ts); absent when off. */
export interface TracingSettings {
  /** Where spans go: the OTLP/HTTP traces URL (…/v1/traces). */
  url: string;
  headers: Record<string, string>;
  protocol: 'http/protobuf' | 'http/json';
  sampler: SamplerName;
  /** The ratio of the *traceidratio samplers (0..1). */
  ratio: number;
  /** The first part of each service's name (OTEL_SERVICE_NAME, default toolshift). */
  serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES. */
  resource: Record<string, string>;
  /** Prompts, arguments and results on spans (off by default); secrets are removed whatever this says. */
  content: boolean;
}

/** The longest span name (a tool's name from a model or a client goes into one). */
export const SPAN_NAME_MAX = 200;

/** How long a stopping service waits for its last spans to be sent. */
const SHUTDOWN_MS = 2000;

/** The longest attribute value a span keeps (content is cut there): an exported span stays bounded. */
export const ATTRIBUTE_VALUE_LIMIT = 16 * 1024;

/** One service's tracing: its tracer, whether content is captured, and how secrets are removed from it. */
export interface ServiceTracing {
  tracer: Tracer;
  content: boolean;
  /** `text` with every known secret replaced by `[redacted]`. */
  redact(text: string): string;
  /** `text` redacted, then cut to `max` characters: what every text from outside becomes on a span. */
  safe(text: string, max?: number): string;
  /** Sends what is buffered and stops (the service is closing). */
  shutdown(): Promise<void>;
}

const services = new Map<string, ServiceTracing>();
let globalsSet = false;

/** The tracing of `service` in this thread, when it is on. */
export function tracingOf(service: string): ServiceTracing | undefined {
  return services.size === 0 ? undefined : services.get(service);
}

/** True when any service of this thread traces (the cheap test every helper below starts with). */
export function tracingOn(): boolean {
  return services.size > 0;
}

/** Secrets shorter than this are not searched for (they would match ordinary text). */
const MIN_SECRET = 8;

/** A partial secret shorter than this at the end of a cut text is left (it could be any text). */
const MIN_PARTIAL = 6;

/**
 * Replaces every known secret in text, longest first (a secret containing another goes whole), and any bearer
 * credential. A text cut short elsewhere (an event's output, a provider's message) may end in the start of a
 * secret: that start is replaced too.
 */
export function secretRedactor(secrets: readonly (string | undefined)[]): (text: string) => string {
  const known = [
    ...new Set(secrets.filter((s): s is string => typeof s === 'string' && s.length >= MIN_SECRET)),
  ];
  known.sort((a, b) => b.length - a.length);
  // A bearer credential of any kind, known or not, whatever the settings.
  const bearer = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi;
  return (text) => {
    let out = text;
    for (const s of known) if (out.includes(s)) out = out.split(s).join('[redacted]');
    // The start of a secret at the very end (before a closing ellipsis, quote or space).
    const tail = /[…"'\s.]*$/.exec(out)?.[0] ?? '';
    const body = out.slice(0, out.length - tail.length);
    for (const s of known) {
      for (let k = Math.min(s.length - 1, body.length); k >= MIN_PARTIAL; k--) {
        if (body.endsWith(s.slice(0, k))) {
          out = `${body.slice(0, body.length - k)}[redacted]${tail}`;
          break;
        }
      }
    }
    return out.replace(bearer, '$1 [redacted]');
  };
}

function samplerFor(
  sdk: typeof import('@opentelemetry/sdk-trace'),
  name: SamplerName,
  ratio: number,
): import('@opentelemetry/sdk-trace').Sampler {
  const { AlwaysOnSampler, AlwaysOffSampler, TraceIdRatioBasedSampler, ParentBasedSampler } = sdk;
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Where tracing's own warnings go: the logger of the service that started tracing last. */
let warnLog: WarnLog | undefined;

/** Export failures are logged at most once a minute (a collector that is down would otherwise fill the log). */
function quietDiag(): void {
  let last = 0;
  const warn = (message: string, ...args: unknown[]) => {
    const now = Date.now();
    if (now - last < 60_000) return;
    last = now;
    warnLog?.warn({ detail: args.map(String).join(' ').slice(0, 500) }, `tracing: ${message}`);
  };
  diag.setLogger(
    { error: warn, warn, info: () => {}, debug: () => {}, verbose: () => {} },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
}

/**
 * Starts tracing for `service` when `settings` say so (else returns undefined and nothing is loaded): its own
 * tracer provider (service.name `<OTEL_SERVICE_NAME>-<service>`), a batch processor (bounded queue: spans are
 * dropped, never buffered without limit, when the collector cannot keep up) and the OTLP/HTTP exporter.
 */
export async function startTracing(
  service: string,
  settings: TracingSettings | undefined,
  opts: { log: WarnLog; secrets: readonly (string | undefined)[]; version?: string },
): Promise<ServiceTracing | undefined> {
  if (!settings) return undefined;
  const sdk = await import('@opentelemetry/sdk-trace');
  const { resourceFromAttributes } = await import('@opentelemetry/resources');
  const exporterModule =
    settings.protocol === 'http/json'
      ? await import('@opentelemetry/exporter-trace-otlp-http')
      : await import('@opentelemetry/exporter-trace-otlp-proto');
  if (!globalsSet) {
    const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
    const { W3CTraceContextPropagator } = await import('@opentelemetry/core');
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    quietDiag();
    globalsSet = true;
  }
  warnLog = opts.log;
  const exporter = new exporterModule.OTLPTraceExporter({ url: settings.url, headers: settings.headers });
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({
      ...settings.resource,
      'service.name': `${settings.serviceName}-${service}`,
      'service.namespace': settings.serviceName,
      'service.instance.id': `${os.hostname()}:${process.pid}`,
      ...(opts.version ? { 'service.version': opts.version } : {}),
    }),
    sampler: samplerFor(sdk, settings.sampler, settings.ratio),
    spanLimits: { attributeValueLengthLimit: ATTRIBUTE_VALUE_LIMIT, eventCountLimit: 64, linkCountLimit: 8 },
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter,
        maxQueueSize: 4096,
        maxExportBatchSize: 512,
        scheduledDelayMillis: 1000,
      }),
    ],
  });
  const redact = secretRedactor([...opts.secrets, ...Object.values(settings.headers)]);
  const tracing: ServiceTracing = {
    tracer: provider.getTracer('toolshift', opts.version),
    content: settings.content,
    redact,
    safe: (text, max = 500) => {
      const clean = redact(text);
      return clean.length > max ? `${clean.slice(0, max)}…` : clean;
    },
    shutdown: async () => {
      services.delete(service);
      // What is still buffered is sent now, within SHUTDOWN_MS (a collector that is down must not hold up a
      // stopping daemon); one that cannot take it is said once, and stopping goes on.
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<string>((r) => {
        timer = setTimeout(() => r(`no answer within ${SHUTDOWN_MS} ms`), SHUTDOWN_MS);
      });
      const failed = await Promise.race([
        provider.shutdown().then(
          () => undefined,
          (err: unknown) =>
            Array.isArray(err) ? err.map((e) => (e as Error)?.message ?? e).join('; ') : String(err),
        ),
        late,
      ]);
      clearTimeout(timer);
      if (failed)
        opts.log.warn(
          { detail: failed.slice(0, 500), url: settings.url },
          'tracing: the last spans could not be sent on stopping',
        );
    },
  };
  services.set(service, tracing);
  return tracing;
}

/**
 * A task's current span, kept in its async context: the agent loop's spans come and go (an attempt ends at an
 * approval wait and another begins), so what the task's HTTP calls carry is read from here when they are made.
 */
export interface SpanHolder {
  current: Span | undefined;
}
const HOLDER = createContextKey('toolshift span holder');

/** Runs `fn` (and everything it awaits) with `holder` as its source of the current span. */
export function withSpanHolder<T>(holder: SpanHolder, fn: () => T): T {
  return context.with(context.active().setValue(HOLDER, holder), fn);
}

/** The context whose span outgoing calls carry: the task's current span, else the active one. */
function outgoingContext(): Context {
  const active = context.active();
  const holder = active.getValue(HOLDER) as SpanHolder | undefined;
  if (!holder) return active;
  return holder.current ? trace.setSpan(ROOT_CONTEXT, holder.current) : ROOT_CONTEXT;
}

/**
 * Runs `fn` as the other side of a call made in this process would (lib/http/local-hop.ts): in the context an
 * HTTP request would have carried (the task's current span, without the task's holder), told whether that
 * continues a trace. Tracing off: `fn` as it is.
 */
export function asCallee<T>(fn: (traced: boolean) => T): T {
  if (!globalsSet || services.size === 0) return fn(false);
  const outgoing = outgoingContext();
  return context.with(outgoing, () => fn(trace.getSpan(outgoing) !== undefined));
}

/** The current span's context, if any (for log lines). */
function currentSpanContext(): SpanContext | undefined {
  return trace.getSpanContext(outgoingContext());
}

/** `traceparent` (and `tracestate`) for an outgoing HTTP request; empty when tracing is off or no span is current. */
export function traceHeaders(): Record<string, string> {
  if (!globalsSet || services.size === 0) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(outgoingContext(), carrier);
  return carrier;
}

/** The trace and span ids for a log line, so it leads to its trace; empty when there are none (or not sampled). */
export function logTraceIds(): { trace_id?: string; span_id?: string } {
  if (!globalsSet || services.size === 0) return {};
  const sc = currentSpanContext();
  // Only a sampled span's ids: an unsampled one leads to no trace anywhere.
  return sc && (sc.traceFlags & 1) === 1 ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}

/** The context a carrier (HTTP headers, or an MCP request's `params._meta`) continues, if it carries one. */
export function extractContext(carrier: Record<string, unknown> | undefined): Context | undefined {
  if (!carrier || !globalsSet) return undefined;
  const { traceparent, tracestate } = carrier;
  if (typeof traceparent !== 'string') return undefined;
  const fields: Record<string, string> = { traceparent };
  if (typeof tracestate === 'string') fields.tracestate = tracestate;
  const ctx = propagation.extract(ROOT_CONTEXT, fields);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/** `traceparent`/`tracestate` of the active span, as an MCP request's `params._meta` carries them. */
export function traceMeta(): Record<string, string> | undefined {
  const headers = traceHeaders();
  return headers.traceparent ? headers : undefined;
}

/**
 * Runs `fn` inside a span of `service` (when it traces) and ends it: an exception ends it as an error (its
 * type in error.type) and is thrown on. Without tracing `fn` runs as it is, given no span.
 */
export async function inSpan<T>(
  service: string,
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  const tracing = tracingOf(service);
  if (!tracing) return fn(undefined);
  const parent = options.parent ?? context.active();
  const span = tracing.tracer.startSpan(
    tracing.safe(name, SPAN_NAME_MAX),
    { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    failSpan(span, err, undefined, tracing);
    throw err;
  } finally {
    span.end();
  }
}

/** Marks a span failed: error.type (the error's class, or what the caller names) and its message, made safe. */
export function failSpan(span: Span, err: unknown, type?: string, tracing?: ServiceTracing): void {
  const e = err as { name?: string; message?: string } | undefined;
  span.setAttribute(GENAI.errorType, (type ?? e?.name ?? 'Error').slice(0, 64));
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: tracing ? tracing.safe(String(e?.message ?? err)) : '[an error]',
  });
}

export { type Context, context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace };

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import {
  extractContext,
  inSpan,
  logTraceIds,
  secretRedactor,
  startTracing,
  traceHeaders,
  tracingOn,
} from '../../lib/telemetry/tracing.ts';
import { startOtlpReceiver } from '../helpers/otlp.ts';

// lib/telemetry/tracing.ts and its settings: the standard OTEL_* variables read and refused with reasons; off, nothing
// happens; the sampler decides what is exported; a collector that is down costs a warning, not a crash.

const SECRET = 'sk-unit-secret-123456';
const base = { TOOLSHIFT_DATA_DIR: '/tmp/toolshift-tracing-test' };
const settingsOf = (env: Record<string, string>) => loadConfig({ ...base, ...env }).tracing;

describe('the OTEL_* settings', () => {
  it('are off without an endpoint, and off when disabled whatever else is set', () => {
    expect(settingsOf({})).toBeUndefined();
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
    expect(settingsOf({ ...endpoint, OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(settingsOf({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });

  it('add /v1/traces to the base endpoint, take the traces endpoint as it is, and merge the headers', () => {
    expect(
      settingsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://cloud.langfuse.com/api/public/otel/',
        OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Basic%20cGs6c2s=,x-a=1',
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-a=2',
        OTEL_SERVICE_NAME: 'agents',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod',
      }),
    ).toEqual({
      url: 'https://cloud.langfuse.com/api/public/otel/v1/traces',
      headers: { Authorization: 'Basic cGs6c2s=', 'x-a': '2' },
      protocol: 'http/protobuf',
      sampler: 'parentbased_always_on',
      ratio: 1,
      serviceName: 'agents',
      resource: { 'deployment.environment.name': 'prod' },
      content: false,
    });
    expect(
      settingsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
      }),
    ).toMatchObject({ url: 'http://b:4318/custom', protocol: 'http/json', content: true });
  });

  it('refuse bad values, naming the variable and what is valid', () => {
    const refused = (env: Record<string, string>) => {
      try {
        settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', ...env });
      } catch (err) {
        return (err as Error).message;
      }
      return 'accepted';
    };
    expect(refused({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toMatch(
      /OTEL_EXPORTER_OTLP_PROTOCOL: must be http\/protobuf or http\/json \(grpc is not supported/,
    );
    expect(refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost:4318' })).toMatch(
      /OTEL_EXPORTER_OTLP_ENDPOINT: must be an http\(s\) URL/,
    );
    expect(refused({ OTEL_TRACES_SAMPLER: 'sometimes' })).toMatch(
      /OTEL_TRACES_SAMPLER: must be one of always_on, always_off, traceidratio/,
    );
    expect(refused({ OTEL_TRACES_SAMPLER_ARG: '2' })).toMatch(/OTEL_TRACES_SAMPLER_ARG/);
    expect(refused({ OTEL_EXPORTER_OTLP_HEADERS: 'Authorization' })).toMatch(
      /OTEL_EXPORTER_OTLP_HEADERS: "Authorization" is not key=value/,
    );
    expect(refused({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'yes' })).toMatch(
      /OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: must be true or false/,
    );
  });
});

describe('secrets', () => {
  it('are replaced wherever they appear, a longer one whole, and any bearer credential too', () => {
    const redact = secretRedactor(['short', 'tok-1234567890', 'tok-1234567890-longer', undefined]);
    expect(redact('a tok-1234567890-longer and tok-1234567890; short stays')).toBe(
      'a [redacted] and [redacted]; short stays',
    );
    expect(redact('Authorization: Bearer abcdefghijklmnop')).toBe('Authorization: Bearer [redacted]');
    // A text cut inside a secret: its start goes too.
    expect(redact('the output was cut here: tok-12345…')).toBe('the output was cut here: [redacted]…');
    expect(redact('an ordinary ending tok')).toBe('an ordinary ending tok');
  });
});

describe('tracing', () => {
  it('off: no spans, no headers, no ids on log lines; the work runs as it is', async () => {
    expect(tracingOn()).toBe(false);
    // Nothing registered with the OpenTelemetry API (no context manager, propagator or provider).
    const registry = (globalThis as Record<symbol, object | undefined>)[Symbol.for('opentelemetry.js.api.1')];
    expect(Object.keys(registry ?? {}).filter((k) => k !== 'version')).toEqual([]);
    expect(traceHeaders()).toEqual({});
    expect(logTraceIds()).toEqual({});
    expect(await inSpan('agent-server', 'x', {}, async (span) => span)).toBeUndefined();
    expect(
      extractContext({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }),
    ).toBeUndefined();
  });

  it('on: the sampler decides what is exported; a sampled parent is followed; ids go on log lines', async () => {
    const receiver = await startOtlpReceiver();
    const log = { warn: () => {} };
    const tracing = await startTracing(
      'tool-server',
      {
        url: `${receiver.url}/v1/traces`,
        headers: {},
        protocol: 'http/json',
        sampler: 'parentbased_traceidratio',
        ratio: 0,
        serviceName: 'test',
        resource: {},
        content: false,
      },
      { log, secrets: [SECRET] },
    );
    expect(tracingOn()).toBe(true);
    // A root at ratio 0 is not sampled: nothing is exported, no ids are printed.
    await inSpan('tool-server', 'dropped', {}, async () => {
      expect(logTraceIds()).toEqual({});
    });
    // A child of a sampled remote parent is kept (parent-based), and its ids are on log lines made in it.
    const parent = extractContext({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
    await inSpan('tool-server', 'kept', { parent }, async () => {
      expect(logTraceIds()).toMatchObject({ trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' });
      expect(traceHeaders().traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    });
    await expect(
      inSpan('tool-server', 'failed', { parent }, async () => Promise.reject(new TypeError('bad'))),
    ).rejects.toThrow('bad');
    // A secret in an error's message, or in a name from outside, never goes out; a name is bounded.
    await expect(
      inSpan('tool-server', 'leaky', { parent }, async () =>
        Promise.reject(new Error(`Cannot reach http://u:${SECRET}@db: refused`)),
      ),
    ).rejects.toThrow();
    await inSpan('tool-server', `${'n'.repeat(300)}${SECRET}`, { parent }, async () => {});
    await tracing?.shutdown();
    const all = receiver.spans();
    expect(receiver.bytes().toString()).not.toContain(SECRET);
    expect(all.find((s) => s.name === 'leaky')?.status.message).toBe(
      'Cannot reach http://u:[redacted]@db: refused',
    );
    expect(Math.max(...all.map((s) => s.name.length))).toBeLessThanOrEqual(201);
    const spans = all.filter((s) => s.name === 'failed' || s.name === 'kept');
    expect(spans.map((s) => s.name).sort()).toEqual(['failed', 'kept']);
    expect(spans[0].service).toBe('test-tool-server');
    const failed = spans.find((s) => s.name === 'failed');
    expect(failed?.attributes['error.type']).toBe('TypeError');
    expect(failed?.status).toMatchObject({ code: 2, message: 'bad' });
    await receiver.close();
  });

  it('a collector that is down costs a warning once, not a crash or a hang', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const warnings: string[] = [];
    const tracing = await startTracing(
      'mcp-gateway',
      {
        url: `http://127.0.0.1:${port}/v1/traces`,
        headers: {},
        protocol: 'http/protobuf',
        sampler: 'always_on',
        ratio: 1,
        serviceName: 'test',
        resource: {},
        content: false,
      },
      { log: { warn: (_d, m) => warnings.push(m) }, secrets: [] },
    );
    for (let i = 0; i < 50; i++) await inSpan('mcp-gateway', `span ${i}`, {}, async () => i);
    await tracing?.shutdown();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^tracing: /);
  }, 30_000);
});

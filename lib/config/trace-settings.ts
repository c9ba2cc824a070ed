// The settings of traces, a group of the configuration reference (config-docs.ts) kept apart for its length.

/** OpenTelemetry's own variables as toolshift reads them. */
export const TRACE_SETTINGS = {
  title: 'Traces (OpenTelemetry, off unless an endpoint is set)',
  settings: {
    OTEL_EXPORTER_OTLP_ENDPOINT: {
      doc: 'the OTLP/HTTP base URL (`/v1/traces` is added), e.g. `http://127.0.0.1:4318`; setting it turns traces on',
      default: 'unset: no traces',
    },
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: { doc: 'the full traces URL, used as it is (wins over the above)' },
    OTEL_EXPORTER_OTLP_HEADERS: {
      doc: 'headers sent with each export, `key=value,key2=value2` (values percent-encoded), e.g. an `Authorization`',
    },
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: { doc: 'the same for traces only (added over the above)' },
    OTEL_EXPORTER_OTLP_PROTOCOL: {
      doc: '`http/protobuf` or `http/json` (gRPC is not offered)',
      default: '`http/protobuf`',
    },
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: { doc: 'the same for traces only' },
    OTEL_SERVICE_NAME: {
      doc: 'the first part of each service’s `service.name`: `<name>-agent-server`, `<name>-mcp-gateway`, `<name>-tool-server`',
      default: '`toolshift`',
    },
    OTEL_RESOURCE_ATTRIBUTES: {
      doc: 'more resource attributes, `key=value,…` (e.g. `deployment.environment.name=prod`)',
    },
    OTEL_TRACES_SAMPLER: {
      doc: '`parentbased_always_on`, `parentbased_traceidratio`, `traceidratio`, `always_on`, `always_off`, `parentbased_always_off`',
    },
    OTEL_TRACES_SAMPLER_ARG: { doc: 'the ratio of the `*traceidratio` samplers, 0–1' },
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: {
      doc: '`true`: prompts, model replies, tool arguments and results go on the spans (known secrets are removed whatever this says)',
      default: '`false`',
    },
    OTEL_TRACES_EXPORTER: { doc: '`none` turns traces off whatever else is set' },
    OTEL_SDK_DISABLED: { doc: '`true` turns traces off whatever else is set' },
  },
};

import { z } from 'zod';
import { TOKENIZERS } from '../telemetry/tokens.ts';
import { SAMPLERS } from '../telemetry/tracing.ts';
import { PROVIDERS } from './provider.ts';
import { SIGN_IN_ENV } from './sign-in.ts';

// Every environment variable toolshift reads, with its check and default (lib/config/config.ts turns it into the
// services' configuration; lib/config/config-docs.ts describes each one for docs/configuration.md and .env.example).

const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);
const list = z
  .string()
  .optional()
  .transform((v) => (v ?? '').split(':').filter((s) => s.trim() !== ''));
/** Comma-separated (host names and origins contain ':'). */
const commaList = z
  .string()
  .optional()
  .transform((v) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
  );
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v && v.trim() !== '' ? v.trim() : undefined));

/** A yes/no variable: 1/true or 0/false (empty: no). */
const flag = z
  .enum(['', '0', '1', 'true', 'false'], { message: 'must be true or false (1 or 0)' })
  .optional()
  .transform((v) => v === '1' || v === 'true');
/**
 * exposure auto's default threshold: the tool-definition tokens at which the bench's twelve tasks cost as much
 * all-loaded as dynamic (primed, activation without a turn) at gpt-4.1's prices with prompt caching, rounded
 * down (`npm run bench` prints the crossover).
 */
export const AUTO_EXPOSURE_TOKENS = 1_600;

/** A yes/no variable that is yes unless set to 0/false. */
const onUnlessOff = z
  .enum(['', '0', '1', 'true', 'false'], { message: 'must be true or false (1 or 0)' })
  .optional()
  .transform((v) => v === undefined || v === '' || v === '1' || v === 'true');
const httpUrl = optionalString.refine(
  (v) => v === undefined || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)),
  'must be an http(s) URL, e.g. http://127.0.0.1:4318',
);
const otlpProtocol = z
  .enum(['http/protobuf', 'http/json'], {
    message:
      'must be http/protobuf or http/json (grpc is not supported; use the OTLP/HTTP port, usually 4318)',
  })
  .optional();

/** Days a kind of row is kept (fractions allowed); 0 keeps it for ever. */
const retentionDays = z.coerce.number().min(0).max(36_500).default(30);

export const EnvSchema = z.object({
  ...SIGN_IN_ENV,
  HOST: z.string().default('127.0.0.1'),
  AGENT_PORT: port(8000),
  GATEWAY_PORT: port(8080),
  TOOL_SERVER_PORT: port(8001),
  AGENT_URL: optionalString,
  GATEWAY_URL: optionalString,
  TOOL_SERVER_URL: optionalString,
  OPENAI_BASE_URL: optionalString.refine(
    (v) => v === undefined || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)),
    'must be an http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1',
  ),
  OPENAI_API_KEY: optionalString,
  AGENT_PROVIDER: z
    .enum(['', ...PROVIDERS], {
      message: `must be ${PROVIDERS.slice(0, -1).join(', ')} or ${PROVIDERS.at(-1)} (empty: chosen from the endpoint settings)`,
    })
    .optional()
    .transform((v) => (v ? v : undefined)),
  ANTHROPIC_BASE_URL: optionalString.refine(
    (v) => v === undefined || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)),
    'must be an http(s) URL of the Anthropic Messages API, e.g. https://api.anthropic.com',
  ),
  ANTHROPIC_API_KEY: optionalString,
  AGENT_MODEL: optionalString,
  AGENT_MODEL_MAX_TOKENS: z.coerce.number().int().min(1).max(1_000_000).default(8192),
  AGENT_MAX_STEPS: z.coerce.number().int().min(1).max(500).default(20),
  AGENT_MODEL_TIMEOUT_MS: z.coerce.number().int().min(100).default(120_000),
  AGENT_MODEL_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(10).default(4),
  AGENT_MODEL_STREAM: z
    .enum(['', '0', '1', 'true', 'false'], { message: 'must be true or false (1 or 0)' })
    .optional()
    .transform((v) => v === undefined || v === '' || v === '1' || v === 'true'),
  AGENT_MODEL_STALL_MS: z.coerce.number().int().min(100).default(60_000),
  AGENT_MAX_DURATION_S: z.coerce.number().int().min(1).max(604_800).default(1800),
  CONSENT_TIMEOUT_S: z.coerce.number().int().min(1).max(604_800).default(3600),
  AGENT_CONTEXT_TOKENS: z.coerce.number().int().min(1024).max(10_000_000).optional(),
  RUN_CODE_CPU_MS: z.coerce.number().int().min(10).max(600_000).default(5_000),
  RUN_CODE_MEMORY_MB: z.coerce.number().int().min(4).max(1024).default(64),
  RUN_CODE_CALLS: z.coerce.number().int().min(1).max(10_000).default(200),
  RUN_CODE_OUTPUT_KB: z.coerce.number().int().min(1).max(1024).default(32),
  RUN_CODE_TIMEOUT_S: z.coerce.number().int().min(1).max(3600).default(120),
  AGENT_SSE_HEARTBEAT_S: z.coerce.number().min(0.01).max(3600).default(15),
  AGENT_WEBHOOK_SECRET: optionalString.refine(
    (v) => v === undefined || /^whsec_[A-Za-z0-9+/]{22,500}={0,2}$/.test(v),
    'must be a Standard Webhooks secret: whsec_ and the base64 of 16 to 375 random bytes (toolshift makes one)',
  ),
  AGENT_WEBHOOK_ALLOW_HOSTS: commaList,
  AGENT_WEBHOOK_TIMEOUT_S: z.coerce.number().min(0.1).max(120).default(15),
  AGENT_WEBHOOK_MAX_AGE_S: z.coerce.number().min(1).max(2_592_000).default(86_400),
  TOKENIZER: z.enum(TOKENIZERS).default('o200k_base'),
  TOOL_TOKEN_BUDGET: z.coerce.number().int().min(1).optional(),
  DISCOVERY_LEARNING: z
    .enum(['', '0', '1', 'true', 'false'], { message: 'must be true or false (1 or 0)' })
    .optional()
    .transform((v) => v === undefined || v === '' || v === '1' || v === 'true'),
  TOOL_EXPOSURE: z
    .enum(['auto', 'native', 'dispatch', 'code'], { message: 'must be auto, native, dispatch or code' })
    .default('auto'),
  AUTO_EXPOSURE_TOKENS: z.coerce.number().int().min(0).max(10_000_000).default(AUTO_EXPOSURE_TOKENS),
  AGENT_PRIME_TOOLSETS: onUnlessOff,
  AUTO_ACTIVATE: onUnlessOff,
  LOG_FORMAT: z.enum(['json', 'pretty', 'auto']).default('auto'),
  TOOLSHIFT_DATA_DIR: optionalString,
  DATABASE_URL: z
    .string()
    .regex(
      /^postgres(ql)?:\/\/\S+$/,
      'must be a postgres:// (or postgresql://) URL, e.g. postgres://user:password@host:5432/toolshift',
    )
    .optional(),
  TOOLSETS_DIR: optionalString,
  USER_TOOLSETS_DIR: optionalString,
  FS_ROOTS: list,
  FS_READONLY_ROOTS: list,
  FS_MAX_READ_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024),
  GATEWAY_ADMIN_TOKEN: optionalString,
  GATEWAY_AGENT_TOKEN: optionalString,
  GATEWAY_MCP_TOKEN: optionalString,
  GATEWAY_SEAL_KEY: optionalString.refine(
    (v) => v === undefined || v.length >= 32,
    'must be at least 32 characters (a generated one holds 192 random bits)',
  ),
  MCP_ALLOWED_HOSTS: commaList,
  MCP_ALLOWED_ORIGINS: commaList,
  MCP_HANDLE_IDLE_S: z.coerce.number().int().min(60).default(86_400),
  MCP_SESSION_IDLE_S: z.coerce.number().int().min(60).default(3_600),
  MCP_MAX_SESSIONS: z.coerce.number().int().min(1).default(256),
  // At most 256 MiB: a message must fit in one JavaScript string (V8 stops near 512 M characters) and be
  // parsed next to it.
  UPSTREAM_MAX_MESSAGE_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024)
    .max(256 * 1024 * 1024)
    .default(16 * 1024 * 1024),
  UPSTREAM_MAX_RESULT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024),
  UPSTREAM_MAX_PROCESSES: z.coerce.number().int().min(1).max(1000).default(32),
  UPSTREAM_IDLE_S: z.coerce.number().int().min(0).default(600),
  UPSTREAM_MAX_CONCURRENT_CALLS: z.coerce.number().int().min(1).max(1000).default(16),
  UPSTREAM_MAX_CALLS_PER_SESSION: z.coerce.number().int().min(1).max(1000).default(8),
  PROMPTS_DIR: optionalString,
  POLICY_FILE: optionalString,
  APPROVAL_TIMEOUT_S: z.coerce.number().int().min(1).default(600),
  MAX_CALLS_PER_MINUTE: z.coerce.number().int().min(1).default(120),
  MAX_ACTIVATIONS_PER_TASK: z.coerce.number().int().min(1).default(20),
  MAX_CONCURRENT_TASKS: z.coerce.number().int().min(1).default(4),
  MAX_QUEUED_TASKS: z.coerce.number().int().min(0).max(1_000_000).default(1000),
  TASK_LEASE_S: z.coerce.number().min(1).max(3600).default(30),
  AGENT_ROLE: z.enum(['all', 'api', 'worker'], { message: 'must be all, api or worker' }).default('all'),
  TOOL_SERVER_TOKEN: optionalString,
  AGENT_API_TOKEN: optionalString,
  VIEWER_TOKEN: optionalString,
  CONSOLE_SESSION_H: z.coerce
    .number()
    .min(0.1)
    .max(24 * 30)
    .default(12),
  ALLOWED_HOSTS: commaList,
  ALLOWED_ORIGINS: commaList,
  MAX_CONNECTIONS: z.coerce.number().int().min(8).default(2048),
  MAX_SSE_STREAMS: z.coerce.number().int().min(1).default(256),
  MAX_SSE_STREAMS_PER_CREDENTIAL: z.coerce.number().int().min(1).default(64),
  HEADERS_TIMEOUT_S: z.coerce.number().min(1).max(600).default(10),
  REQUEST_TIMEOUT_S: z.coerce.number().min(1).max(3600).default(30),
  TOOLSHIFT_AUTH: z
    .enum(['tokens', 'none'], { message: 'must be tokens (the default: generated where not set) or none' })
    .default('tokens'),
  TOOLSHIFT_CREDENTIALS_FILE: optionalString,
  TOOLSHIFT_INSECURE: z
    .enum(['', '0', '1', 'true', 'false'], { message: 'must be 1 or 0' })
    .optional()
    .transform((v) => v === '1' || v === 'true'),
  BRAVE_API_KEY: optionalString,
  FETCH_ALLOW_HOSTS: commaList,
  FETCH_TIMEOUT_MS: z.coerce.number().int().min(100).default(20_000),
  FETCH_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(5 * 1024 * 1024),
  FETCH_USE_PROXY: z
    .enum(['', '0', '1', 'true', 'false'], { message: 'must be 1 or 0' })
    .optional()
    .transform((v) => v === '1' || v === 'true'),
  HTTP_PROXY: optionalString,
  http_proxy: optionalString,
  HTTPS_PROXY: optionalString,
  https_proxy: optionalString,
  NO_PROXY: optionalString,
  no_proxy: optionalString,
  GITHUB_TOKEN: optionalString,
  GITHUB_API_URL: optionalString.refine(
    (v) => v === undefined || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)),
    'must be an http(s) URL',
  ),
  GIT_TOOLS_TIMEOUT_MS: z.coerce.number().int().min(100).default(15_000),
  GIT_TOOLS_MAX_OUTPUT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024),
  DB_QUERY_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  DB_MAX_ROWS: z.coerce.number().int().min(1).max(10_000).default(1000),
  DB_MAX_RESULT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024),
  // Retention (lib/db/retention.ts): rows older than these are deleted while the daemon runs; 0 keeps them.
  AUDIT_RETENTION_DAYS: retentionDays,
  AUDIT_MAX_ROWS: z.coerce.number().int().min(1000).default(1_000_000),
  TASK_RETENTION_DAYS: retentionDays,
  APPROVAL_RETENTION_DAYS: retentionDays,
  SESSION_RETENTION_DAYS: retentionDays,
  RETENTION_INTERVAL_S: z.coerce.number().int().min(10).max(86_400).default(3600),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // OpenTelemetry traces (lib/telemetry/tracing.ts): the standard variables, off unless an endpoint is set.
  OTEL_SDK_DISABLED: flag,
  OTEL_TRACES_EXPORTER: z
    .enum(['otlp', 'none', ''], { message: 'must be otlp or none (traces go out over OTLP/HTTP only)' })
    .optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl,
  OTEL_EXPORTER_OTLP_HEADERS: optionalString,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: optionalString,
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol,
  OTEL_SERVICE_NAME: optionalString,
  OTEL_RESOURCE_ATTRIBUTES: optionalString,
  OTEL_TRACES_SAMPLER: z
    .enum(SAMPLERS, { message: `must be one of ${SAMPLERS.join(', ')}` })
    .default('parentbased_always_on'),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).default(1),
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: flag,
});

/**
 * `key=value,key2=value2` with percent-encoded values, as OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES
 * are written; a pair without `=` is an error naming the variable.
 */

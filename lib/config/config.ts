import { existsSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import type { TracingSettings } from '../telemetry/tracing.ts';
import { EnvSchema } from './config-schema.ts';
import { installationDir, userDataDir } from './installation.ts';
import { DEFAULT_MODELS, endpointOf, providerOf } from './provider.ts';
import { signInSettings } from './sign-in.ts';

// Every setting of every service, read once from the environment (and `.env` if present) and validated,
// so a typo in a port or a root fails at start with the variable's name, not later with a stack trace.

// The variables and their checks are in config-schema.ts.
export { EnvSchema };

/** The parsed environment, every variable checked. */
type Env = z.infer<typeof EnvSchema>;

function keyValues(variable: string, raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (raw ?? '').split(',')) {
    if (pair.trim() === '') continue;
    const at = pair.indexOf('=');
    if (at <= 0) {
      throw new Error(
        `Invalid configuration:\n  ${variable}: "${pair.trim().slice(0, 40)}" is not key=value ` +
          '(write key=value pairs separated by commas, values percent-encoded)',
      );
    }
    let value = pair.slice(at + 1).trim();
    try {
      value = decodeURIComponent(value);
    } catch {}
    out[pair.slice(0, at).trim()] = value;
  }
  return out;
}

/** The tracing settings, or undefined when tracing is off (no endpoint, OTEL_SDK_DISABLED, exporter none). */
function tracingSettings(e: Env): TracingSettings | undefined {
  if (e.OTEL_SDK_DISABLED || e.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  const url =
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base ? `${base.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (!url) return undefined;
  return {
    url,
    headers: {
      ...keyValues('OTEL_EXPORTER_OTLP_HEADERS', e.OTEL_EXPORTER_OTLP_HEADERS),
      ...keyValues('OTEL_EXPORTER_OTLP_TRACES_HEADERS', e.OTEL_EXPORTER_OTLP_TRACES_HEADERS),
    },
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    sampler: e.OTEL_TRACES_SAMPLER,
    ratio: e.OTEL_TRACES_SAMPLER_ARG,
    serviceName: e.OTEL_SERVICE_NAME ?? 'toolshift',
    resource: keyValues('OTEL_RESOURCE_ATTRIBUTES', e.OTEL_RESOURCE_ATTRIBUTES),
    content: e.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
  };
}

/** The validated configuration shared by all three services. */
export type Config = ReturnType<typeof loadConfig>;

/** How this machine reaches a service on `port` of the configured host. */
type Local = (port: number) => string;

/** Reads and validates the environment; throws one error listing every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = readEnv()) {
  const e = parseEnv(env);
  // The data (SQLite files, credentials, the user's toolsets and the default workspace) lives in the user's
  // data directory; what ships with toolshift (toolsets, policy, prompts) is read from where it is installed,
  // so the daemon and the CLI behave the same whatever directory they are started from.
  const dataDir = path.resolve(e.TOOLSHIFT_DATA_DIR ?? userDataDir(env));
  const local: Local = (p) => `http://${reachableHost(e.HOST)}:${p}`;
  return {
    host: e.HOST,
    /** The browser-door settings every service shares (lib/http/security.ts). */
    http: httpSettings(e),
    /**
     * `tokens`: every service needs its tokens, generated into `credentialsFile` where the environment sets
     * none (lib/config/credentials.ts); `none`: routes without a token are open to local processes, as an opt-out.
     */
    auth: {
      mode: e.TOOLSHIFT_AUTH,
      credentialsFile: path.resolve(e.TOOLSHIFT_CREDENTIALS_FILE ?? path.join(dataDir, 'credentials.json')),
    },
    agent: agentSettings(e, local),
    /** The web console (agent-server/console): the viewer's token, and how long a login lasts. */
    console: {
      viewerToken: e.VIEWER_TOKEN,
      sessionMs: Math.round(e.CONSOLE_SESSION_H * 3_600_000),
    },
    /** Signing in with an identity provider: the console's OpenID Connect sign-in, /mcp's OAuth, who is let in. */
    signIn: signInSettings(e),
    gateway: gatewaySettings(e, local, dataDir),
    tools: toolsSettings(e, local, dataDir),
    dataDir,
    /** PostgreSQL for the agent-server's tasks and the gateway's state (DATABASE_URL; unset: SQLite in the data directory). Never logged. */
    databaseUrl: e.DATABASE_URL,
    /** How long rows are kept (ms; 0: for ever) and how often the sweep runs: README "Limits and retention". */
    retention: retentionSettings(e),
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    /** OpenTelemetry traces (lib/telemetry/tracing.ts): undefined when off. */
    tracing: tracingSettings(e),
    /** The encoding tool-definition and message tokens are counted in (lib/telemetry/tokens.ts). */
    tokenizer: e.TOKENIZER,
  };
}

/** The environment checked against EnvSchema, and the roles that need PostgreSQL given one. */
function parseEnv(env: Record<string, string | undefined>): Env {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  if (e.AGENT_ROLE !== 'all' && !e.DATABASE_URL) {
    throw new Error(
      `Invalid configuration:\n  AGENT_ROLE: ${e.AGENT_ROLE} needs DATABASE_URL (PostgreSQL): the API and its ` +
        'workers share tasks only through it; with the embedded SQLite store one process does both (AGENT_ROLE=all)',
    );
  }
  return e;
}

/** The browser door: hosts and origins let in, and the limits against floods. */
function httpSettings(e: Env) {
  return {
    allowedHosts: e.ALLOWED_HOSTS,
    allowedOrigins: e.ALLOWED_ORIGINS,
    insecure: e.TOOLSHIFT_INSECURE,
    /** Floods (lib/http/flood.ts): connections and held-open event streams per service, header and body timeouts. */
    limits: {
      maxConnections: e.MAX_CONNECTIONS,
      maxStreams: e.MAX_SSE_STREAMS,
      maxStreamsPerCredential: e.MAX_SSE_STREAMS_PER_CREDENTIAL,
      headersTimeoutMs: Math.round(e.HEADERS_TIMEOUT_S * 1000),
      requestTimeoutMs: Math.round(e.REQUEST_TIMEOUT_S * 1000),
    },
  };
}

/** The model: its provider (AGENT_PROVIDER, or chosen from the endpoint settings), endpoint, key and limits. */
function modelSettings(e: Env) {
  const provider = providerOf(e);
  return {
    provider,
    ...endpointOf(provider, e),
    name: e.AGENT_MODEL ?? DEFAULT_MODELS[provider],
    timeoutMs: e.AGENT_MODEL_TIMEOUT_MS,
    maxAttempts: e.AGENT_MODEL_MAX_ATTEMPTS,
    stream: e.AGENT_MODEL_STREAM,
    stallMs: e.AGENT_MODEL_STALL_MS,
    /** The output limit a request asks for, where the API requires one (anthropic's `max_tokens`). */
    maxTokens: e.AGENT_MODEL_MAX_TOKENS,
  };
}

/** The agent-server: its address, the model, and how tasks run. */
function agentSettings(e: Env, local: Local) {
  return {
    port: e.AGENT_PORT,
    url: e.AGENT_URL ?? local(e.AGENT_PORT),
    model: modelSettings(e),
    maxSteps: e.AGENT_MAX_STEPS,
    /** How tasks offer tools to the model unless a request says: `auto`, `native`, `dispatch` or `code`. */
    exposure: e.TOOL_EXPOSURE,
    /** exposure auto: up to these tool-definition tokens a task loads every toolset (default: the bench's crossover). */
    autoExposureTokens: e.AUTO_EXPOSURE_TOKENS,
    /** Whether a task starts with the toolset discovery is certain its goal needs (loop/prime.ts). */
    prime: e.AGENT_PRIME_TOOLSETS,
    /** Tasks that may run at once (503 with retry-after beyond; paused ones do not count). */
    maxConcurrentTasks: e.MAX_CONCURRENT_TASKS,
    maxQueuedTasks: e.MAX_QUEUED_TASKS,
    /**
     * What this agent-server does: `all` (the API, and it runs tasks), `api` (the API; tasks wait for
     * workers), `worker` (runs queued tasks; only /health and /metrics are served).
     */
    role: e.AGENT_ROLE,
    /** How long a worker's claim on a running task lasts without a heartbeat (renewed every third). */
    leaseS: e.TASK_LEASE_S,
    /** A task's wall-clock limit unless its request sets `max_duration_s`. */
    maxDurationS: e.AGENT_MAX_DURATION_S,
    /** How long a task waits for its owner to connect their own account for a toolset before it fails. */
    consentTimeoutS: e.CONSENT_TIMEOUT_S,
    /** The model's context budget in tokens (default: its family's window, loop/context.ts). */
    contextTokens: e.AGENT_CONTEXT_TOKENS,
    /** The bounds of one run_code script (code mode; agent-server/sandbox/limits.ts). */
    scriptLimits: {
      cpuMs: e.RUN_CODE_CPU_MS,
      memoryBytes: e.RUN_CODE_MEMORY_MB * 1024 * 1024,
      calls: e.RUN_CODE_CALLS,
      outputBytes: e.RUN_CODE_OUTPUT_KB * 1024,
      wallMs: e.RUN_CODE_TIMEOUT_S * 1000,
    },
    /** How often an idle event stream sends a keep-alive comment. */
    heartbeatMs: Math.round(e.AGENT_SSE_HEARTBEAT_S * 1000),
    apiToken: e.AGENT_API_TOKEN,
    /** Tasks' webhooks (README "Webhooks"): the signing secret, private hosts allowed, each POST's deadline, when to give up. */
    webhook: {
      secret: e.AGENT_WEBHOOK_SECRET,
      allowHosts: e.AGENT_WEBHOOK_ALLOW_HOSTS,
      timeoutMs: Math.round(e.AGENT_WEBHOOK_TIMEOUT_S * 1000),
      maxAgeMs: Math.round(e.AGENT_WEBHOOK_MAX_AGE_S * 1000),
    },
  };
}

/** The MCP gateway: its address and tokens, the MCP face, upstream servers, the ceiling and the toolsets. */
function gatewaySettings(e: Env, local: Local, dataDir: string) {
  return {
    port: e.GATEWAY_PORT,
    url: e.GATEWAY_URL ?? local(e.GATEWAY_PORT),
    adminToken: e.GATEWAY_ADMIN_TOKEN,
    agentToken: e.GATEWAY_AGENT_TOKEN,
    /** What people's own upstream credentials are sealed with (generated where not set). */
    sealKey: e.GATEWAY_SEAL_KEY,
    /** The MCP face (`/mcp`): its token, extra hosts/origins, and idle lifetimes of handles and sessions. */
    mcp: {
      token: e.GATEWAY_MCP_TOKEN,
      allowedHosts: e.MCP_ALLOWED_HOSTS,
      allowedOrigins: e.MCP_ALLOWED_ORIGINS,
      handleIdleMs: e.MCP_HANDLE_IDLE_S * 1000,
      sessionIdleMs: e.MCP_SESSION_IDLE_S * 1000,
      maxSessions: e.MCP_MAX_SESSIONS,
    },
    /**
     * Upstream MCP servers: the most one message may hold, the most of a result the model is given, the
     * stdio servers running at once and their idle lifetime, and the calls in flight per server and per
     * session on one server (never more than per server).
     */
    upstream: {
      maxMessageBytes: e.UPSTREAM_MAX_MESSAGE_BYTES,
      maxResultBytes: e.UPSTREAM_MAX_RESULT_BYTES,
      maxProcesses: e.UPSTREAM_MAX_PROCESSES,
      idleMs: e.UPSTREAM_IDLE_S * 1000,
      maxConcurrentCalls: e.UPSTREAM_MAX_CONCURRENT_CALLS,
      maxCallsPerSession: Math.min(e.UPSTREAM_MAX_CALLS_PER_SESSION, e.UPSTREAM_MAX_CONCURRENT_CALLS),
    },
    promptsDir: path.resolve(e.PROMPTS_DIR ?? path.join(installationDir(), 'prompts')),
    /** The operator's ceiling: policy file, how long an approval may stay pending, per-session limits. */
    // The operator's, like the data: not in the repository or the installed package, which an upgrade replaces.
    policyFile: path.resolve(e.POLICY_FILE ?? path.join(dataDir, 'policy.yaml')),
    approvalTimeoutMs: e.APPROVAL_TIMEOUT_S * 1000,
    limits: { callsPerMinute: e.MAX_CALLS_PER_MINUTE, activationsPerTask: e.MAX_ACTIVATIONS_PER_TASK },
    /** The most tool-definition tokens manage_toolsets may bring a session to (unset: no limit). */
    toolTokenBudget: e.TOOL_TOKEN_BUDGET,
    /** A call of a tool whose toolset is inactive activates it first, when the model's ACTIVATE would pass unasked. */
    autoActivate: e.AUTO_ACTIVATE,
    /** Whether discovery learns keywords from use and ranks with them (docs/upstream-servers.md, "Discovery"). */
    discoveryLearning: e.DISCOVERY_LEARNING,
    toolsetsDir: path.resolve(e.TOOLSETS_DIR ?? path.join(installationDir(), 'toolsets')),
    /** The user's own toolset files (`toolsets import` writes here), loaded after the shipped ones. */
    userToolsetsDir: path.resolve(e.USER_TOOLSETS_DIR ?? path.join(dataDir, 'toolsets')),
  };
}

/** The tool-server: its address, the file roots, and the limits of each family of tools. */
function toolsSettings(e: Env, local: Local, dataDir: string) {
  return {
    port: e.TOOL_SERVER_PORT,
    url: e.TOOL_SERVER_URL ?? local(e.TOOL_SERVER_PORT),
    token: e.TOOL_SERVER_TOKEN,
    roots: e.FS_ROOTS.length > 0 ? e.FS_ROOTS.map((r) => path.resolve(r)) : [path.join(dataDir, 'workspace')],
    /** True when FS_ROOTS was set: its entries must then exist (only the default workspace is created). */
    rootsGiven: e.FS_ROOTS.length > 0,
    readOnlyRoots: e.FS_READONLY_ROOTS.map((r) => path.resolve(r)),
    maxReadBytes: e.FS_MAX_READ_BYTES,
    /** git_tools: per-call timeout and output cap of every git command. */
    git: { timeoutMs: e.GIT_TOOLS_TIMEOUT_MS, maxOutputBytes: e.GIT_TOOLS_MAX_OUTPUT_BYTES },
    /** get_github_pull_request_info: the REST API base and the optional token (never logged or returned). */
    github: {
      apiUrl: e.GITHUB_API_URL ?? 'https://api.github.com',
      token: e.GITHUB_TOKEN,
      timeoutMs: e.GIT_TOOLS_TIMEOUT_MS,
    },
    /** database_tools: deadline of one call (the query process is killed past it) and the result caps. */
    databases: {
      timeoutMs: e.DB_QUERY_TIMEOUT_MS,
      maxRows: e.DB_MAX_ROWS,
      maxResultBytes: e.DB_MAX_RESULT_BYTES,
    },
    /** web_tools: the search key, the hosts exempt from the SSRF guard, limits, and a proxy only if asked. */
    web: {
      braveApiKey: e.BRAVE_API_KEY,
      allowHosts: e.FETCH_ALLOW_HOSTS,
      fetchTimeoutMs: e.FETCH_TIMEOUT_MS,
      fetchMaxBytes: e.FETCH_MAX_BYTES,
      proxy: e.FETCH_USE_PROXY
        ? {
            httpProxy: e.HTTP_PROXY ?? e.http_proxy,
            httpsProxy: e.HTTPS_PROXY ?? e.https_proxy,
            noProxy: e.NO_PROXY ?? e.no_proxy,
          }
        : undefined,
    },
  };
}

/** How long each kind of row is kept, and how often the sweep runs. */
function retentionSettings(e: Env) {
  return {
    auditMs: days(e.AUDIT_RETENTION_DAYS),
    auditMaxRows: e.AUDIT_MAX_ROWS,
    taskMs: days(e.TASK_RETENTION_DAYS),
    approvalMs: days(e.APPROVAL_RETENTION_DAYS),
    sessionMs: days(e.SESSION_RETENTION_DAYS),
    intervalMs: e.RETENTION_INTERVAL_S * 1000,
  };
}

const days = (n: number) => Math.round(n * 86_400_000);

/** How a client on this machine reaches a service listening on `host` (wildcards become loopback). */
export function reachableHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::' || host === '[::]') return '[::1]';
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/**
 * Refuses FS_ROOTS / FS_READONLY_ROOTS entries that do not exist (a typo must not become a new empty root);
 * only the default workspace ($TOOLSHIFT_DATA_DIR/workspace), used when FS_ROOTS is unset, is created by the tool-server.
 */
export function checkRootsExist(tools: {
  roots: string[];
  readOnlyRoots: string[];
  rootsGiven: boolean;
}): void {
  const missing = [
    ...(tools.rootsGiven ? tools.roots.map((r) => ['FS_ROOTS', r]) : []),
    ...tools.readOnlyRoots.map((r) => ['FS_READONLY_ROOTS', r]),
  ].filter(([, dir]) => !existsSync(dir));
  if (missing.length > 0) {
    throw new Error(
      missing.map(([variable, dir]) => `${variable} entry ${dir} does not exist`).join('; ') +
        ': create the directory or correct the variable (roots are never created for you).',
    );
  }
}

/** process.env, with `.env` from the working directory loaded first (real env wins). */
export function readEnv(): Record<string, string | undefined> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  return process.env;
}

import path from 'node:path';
import { recordListening } from '../lib/config/addresses.ts';
import type { Config } from '../lib/config/config.ts';
import { openPostgres } from '../lib/db/postgres.ts';
import { describeDatabase } from '../lib/db/reachability.ts';
import { startRetention } from '../lib/db/retention.ts';
import { openDatabase } from '../lib/db/sqlite.ts';
import { leanFetch } from '../lib/http/lean-fetch.ts';
import { type Security, securityFor } from '../lib/http/security.ts';
import { type Listening, listen } from '../lib/http/serve.ts';
import { type Quota, quotaOf } from '../lib/identity/quota.ts';
import { type IdentityStore, openIdentity } from '../lib/identity/store.ts';
import { createLogger, type Logger } from '../lib/telemetry/log.ts';
import { createMetrics, type Metrics } from '../lib/telemetry/metrics.ts';
import { createTokenCounter, type TokenCounter } from '../lib/telemetry/tokens.ts';
import { startServiceTracing } from '../lib/telemetry/trace-setup.ts';
import type { GatewayLocal } from '../mcp-gateway/contract.ts';
import { type AgentAppDeps, createAgentApp } from './app.ts';
import { createGatewayClient } from './clients/gateway.ts';
import type { Model } from './clients/model.ts';
import { DEFAULT_URLS, ENDPOINT_VARIABLES, modelFor } from './clients/providers.ts';
import { CONNECT_CALLBACK } from './console/connect.ts';
import { CALLBACK_PATH, oidcSignIn } from './console/oidc.ts';
import { createLogins } from './console/sessions.ts';
import { DEFAULT_SCRIPT_LIMITS } from './sandbox/limits.ts';
import type { TaskStore } from './store/interface.ts';
import { createPostgresTaskStore, createTaskStore } from './store/store.ts';
import { createAgent } from './tasks/agent.ts';
import { createAgentMetrics } from './tasks/metrics.ts';
import { startDeliverer } from './webhooks/deliver.ts';
import { type WebhookGuard, webhookGuard } from './webhooks/guard.ts';

/**
 * Builds the agent-server from config and listens; used by main.ts and by start.ts. `announce: false` (start/start.ts,
 * which prints one ready line for the three services) logs where it listens at debug only.
 */
export async function startAgentServer(
  config: Config,
  opts: { log?: Logger; announce?: boolean; gateway?: GatewayLocal } = {},
): Promise<Listening> {
  const log = opts.log ?? createLogger('agent-server', config.logLevel, undefined, config.logFormat);
  const security = securityFor(config, 'agent-server');
  // Users' keys are taken beside the tokens (the gateway's admin API makes them).
  const identity = openIdentity({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }, 'agent-server');
  await identity.store.ready;
  security.identity = { store: identity.store, service: 'agent-server' };
  const tracing = await startServiceTracing('agent-server', config, log);
  requireAgentToken(config);
  // Stopping the process ends the wait of what waits for an unreachable database.
  const stopping = new AbortController();
  const store = await openTaskStore(config, log, stopping.signal);
  const model = modelOf(config, log);
  // Loaded now (about a second) so the first task does not wait for it.
  const tokens = createTokenCounter(config.tokenizer);
  tokens.text('warm');
  const metrics = createMetrics({ processMetrics: true });
  const consoleDeps = consoleOf(config, { store, security, identity: identity.store, log });
  const { logins } = consoleDeps;
  if (security.tokens.length > 0) security.console = logins.door;
  // Without a secret (TOOLSHIFT_AUTH=none and no AGENT_WEBHOOK_SECRET) a task naming a webhook is refused.
  const webhooks = config.agent.webhook.secret ? webhookGuard(config.agent.webhook.allowHosts) : undefined;
  const quotas = (owner: string) => quotaOf(identity.store, owner);
  const agent = agentOf(config, {
    store,
    model,
    tokens,
    metrics,
    log,
    webhooks,
    quotas,
    local: opts.gateway,
  });
  let listening: Listening;
  try {
    listening = await listen(
      createAgentApp({
        agent,
        store,
        log,
        security,
        metrics,
        heartbeatMs: config.agent.heartbeatMs,
        modelHealth: model?.health,
        worker: config.agent.role === 'worker',
        console: consoleDeps,
      }),
      config.agent.port,
      config.host,
      'AGENT_PORT',
      config.http.limits,
    );
  } catch (err) {
    await store.close();
    await identity.release();
    throw err;
  }
  // The CLI finds the API here, and sends it the stored tokens only here (a worker serves no API).
  if (config.agent.role !== 'worker') {
    await recordListening(config, 'agent-server', listening.url, log);
  }
  logListening(log, opts.announce === false ? 'debug' : 'info', config, listening.url, model, tokens);
  // Tasks a previous process left waiting for an approval go on waiting, and resume when it is decided.
  const resumed = await agent.resumeAll();
  if (resumed > 0) log.info({ tasks: resumed }, 'tasks awaiting approval picked up');
  const retention = startTaskRetention(config, store, log);
  const deliverer = webhooksOf(config, store, webhooks, log);
  return {
    ...listening,
    close: async () => {
      stopping.abort();
      await listening.close();
      await agent.shutdown();
      await deliverer?.stop();
      await retention.stop();
      await store.close();
      await identity.release();
      await tracing?.shutdown();
    },
  };
}

/** The task store: PostgreSQL when DATABASE_URL is set, else SQLite in the data directory. */
async function openTaskStore(config: Config, log: Logger, stopping: AbortSignal): Promise<TaskStore> {
  const storeOptions = {
    onWriteError: (err: unknown) => log.error({ err }, 'a task record could not be written'),
    leaseMs: config.agent.leaseS * 1000,
    stopping,
  };
  if (config.databaseUrl) {
    return createPostgresTaskStore(openPostgres(config.databaseUrl, 'agent-server'), storeOptions);
  }
  return createTaskStore(openDatabase(path.join(config.dataDir, 'agent.db')), storeOptions);
}

/** The model tasks talk to (its provider's client), or undefined (with a warning) when none is configured. */
function modelOf(config: Config, log: Logger): Model | undefined {
  const m = config.agent.model;
  if (!m.apiKey && !m.baseURL) {
    log.warn(`no model configured: set ${ENDPOINT_VARIABLES[m.provider]} to run tasks`);
    return undefined;
  }
  return modelFor({
    provider: m.provider,
    baseURL: m.baseURL,
    apiKey: m.apiKey,
    timeoutMs: m.timeoutMs,
    maxAttempts: m.maxAttempts,
    stream: m.stream,
    stallMs: m.stallMs,
    maxTokens: m.maxTokens,
    // undici's request API under the SDK: a third of the CPU of Node 20's fetch per model call.
    fetch: leanFetch,
  });
}

/**
 * Finished tasks older than TASK_RETENTION_DAYS go, with their events, and threads idle as long with their tasks
 * (README "Limits and retention").
 */
function startTaskRetention(config: Config, store: TaskStore, log: Logger) {
  const { retention: keep } = config;
  return startRetention(
    [
      ...(keep.taskMs > 0
        ? [
            {
              name: 'tasks',
              // A task takes its events (up to a few thousand rows) with it: fewer per statement.
              batch: 50,
              step: (limit: number, now: number) =>
                store.pruneTasks(new Date(now - keep.taskMs).toISOString(), limit),
            },
            // A thread idle as long goes with its turns (its tasks are kept while it is).
            {
              name: 'threads',
              batch: 20,
              step: (limit: number, now: number) =>
                store.pruneThreads(new Date(now - keep.taskMs).toISOString(), limit),
            },
          ]
        : []),
      // Expired console logins and login links.
      { name: 'console logins', batch: 500, step: (limit: number) => store.pruneLogins(limit) },
    ],
    { intervalMs: keep.intervalMs, log },
  );
}

/** Tasks' webhooks, POSTed from the store by every process that runs tasks (README "Webhooks"). */
function webhooksOf(config: Config, store: TaskStore, guard: WebhookGuard | undefined, log: Logger) {
  const { secret, timeoutMs, maxAgeMs } = config.agent.webhook;
  if (!guard || !secret || config.agent.role === 'api') return undefined;
  return startDeliverer({ store, secret, guard, timeoutMs, maxAgeMs, log });
}

/** The agent: tasks run against the gateway with the agent's own token, and the model. */
function agentOf(
  config: Config,
  {
    store,
    model,
    tokens,
    metrics,
    log,
    webhooks,
    quotas,
    local,
  }: {
    store: TaskStore;
    model: Model | undefined;
    tokens: TokenCounter;
    metrics: Metrics;
    log: Logger;
    webhooks: WebhookGuard | undefined;
    quotas: (owner: string) => Promise<Quota | undefined>;
    /** The gateway in this process (start/stack.ts): called without a socket. */
    local?: GatewayLocal;
  },
) {
  const gateway = createGatewayClient(
    {
      baseUrl: config.gateway.url,
      headers: config.gateway.agentToken
        ? { authorization: `Bearer ${config.gateway.agentToken}` }
        : undefined,
    },
    local,
  );
  return createAgent({
    store,
    gateway,
    model,
    modelName: config.agent.model.name,
    modelBaseURL: config.agent.model.baseURL ?? DEFAULT_URLS[config.agent.model.provider],
    modelProvider: config.agent.model.provider,
    defaultMaxSteps: config.agent.maxSteps,
    defaultMaxDurationS: config.agent.maxDurationS,
    consentTimeoutS: config.agent.consentTimeoutS,
    contextTokens: config.agent.contextTokens,
    scriptLimits: { ...DEFAULT_SCRIPT_LIMITS, ...config.agent.scriptLimits },
    autoExposureTokens: config.agent.autoExposureTokens,
    tokens,
    metrics: createAgentMetrics(metrics),
    log,
    // The API alone runs no task: each waits in the queue for a worker.
    maxConcurrentTasks: config.agent.role === 'api' ? 0 : config.agent.maxConcurrentTasks,
    maxQueuedTasks: config.agent.maxQueuedTasks,
    exposure: config.agent.exposure,
    prime: config.agent.prime,
    webhooks,
    quotaOf: quotas,
  });
}

/** With the gateway locked, the agent needs a token of its own: it never holds the operator's. */
function requireAgentToken(config: Config): void {
  if (config.gateway.adminToken && !config.gateway.agentToken) {
    throw new Error(
      'GATEWAY_ADMIN_TOKEN is set, so the gateway needs a token on every route: set GATEWAY_AGENT_TOKEN too ' +
        '(the agent-server’s own credential, a different value)',
    );
  }
}

/** The endpoint and model, never the key: enough to tell which provider a failing task was talking to. */
function logListening(
  log: Logger,
  level: 'debug' | 'info',
  config: Config,
  url: string,
  model: Model | undefined,
  tokens: TokenCounter,
): void {
  const m = config.agent.model;
  log[level](
    {
      url,
      model: model ? m.name : null,
      provider: model ? m.provider : null,
      model_base_url: model ? (m.baseURL ?? DEFAULT_URLS[m.provider]) : null,
      gateway: config.gateway.url,
      tokenizer: tokens.name,
    },
    'agent-server listening',
  );
}

/**
 * The console's deps: its logins (a session cookie becomes a second way in, checked with the rest in
 * lib/http/security.ts), signing in with the identity provider when OIDC_ISSUER is set, what the Overview shows.
 */
function consoleOf(
  config: Config,
  deps: { store: TaskStore; security: Security; identity: IdentityStore; log: Logger },
): NonNullable<AgentAppDeps['console']> {
  const gateway = { baseUrl: config.gateway.url };
  const logins = createLogins({ ...deps, gateway, sessionMs: config.console.sessionMs });
  const signIn = config.signIn.console;
  // The identity provider, and an upstream's authorization server, send the browser back from their own sites.
  deps.security.landings = new Set([...(signIn ? [CALLBACK_PATH] : []), CONNECT_CALLBACK]);
  return {
    logins,
    gateway,
    ...(signIn
      ? {
          signIn: oidcSignIn({
            settings: signIn,
            rule: config.signIn.rule,
            identity: deps.identity,
            logins,
            sessionMs: config.console.sessionMs,
            log: deps.log,
          }),
        }
      : {}),
    model: {
      name: config.agent.model.name,
      baseURL: config.agent.model.baseURL ?? DEFAULT_URLS[config.agent.model.provider],
      provider: config.agent.model.provider,
    },
    database: describeDatabase(config.databaseUrl, config.dataDir),
  };
}

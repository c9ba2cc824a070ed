import path from 'node:path';
import { recordListening } from '../lib/config/addresses.ts';
import { type Config, readEnv } from '../lib/config/config.ts';
import { startRetention } from '../lib/db/retention.ts';
import { writableDataDir } from '../lib/db/sqlite.ts';
import { securityFor } from '../lib/http/security.ts';
import { type Listening, listen } from '../lib/http/serve.ts';
import { createLogger } from '../lib/telemetry/log.ts';
import { createMetrics } from '../lib/telemetry/metrics.ts';
import { createTokenCounter } from '../lib/telemetry/tokens.ts';
import { startServiceTracing } from '../lib/telemetry/trace-setup.ts';
import { createGatewayApp } from './app.ts';
import { currentActor } from './audit-context.ts';
import type { Backend } from './backends/backend.ts';
import { toolServerBackend } from './backends/tool-server-backend.ts';
import { UpstreamPool } from './backends/upstream-pool.ts';
import { buildCatalog, type Catalog, loadToolsets } from './catalog/catalog.ts';
import { createPromptCatalog } from './catalog/prompts.ts';
import { toolsetVariables } from './catalog/toolset-files.ts';
import { approvalStore } from './ceiling/approvals.ts';
import { type Ceiling, createCeiling } from './ceiling/ceiling.ts';
import { createGateway } from './core/gateway.ts';
import { instrumentGateway } from './core/metrics.ts';
import { createMcpFace } from './face/face.ts';
import { handleStore } from './face/handles.ts';
import { legacySessionStore } from './face/legacy-store.ts';
import { gatewayRetentionRules } from './store/retention.ts';
import { openGatewayState } from './store/store.ts';

/**
 * Loads and checks the catalog against the backends, opens the state store, and listens. `announce: false`
 * (start/start.ts, which prints one ready line for the three services) logs where it listens at debug only.
 */
export async function startGateway(
  config: Config,
  opts: { backendWaitMs?: number; announce?: boolean } = {},
): Promise<Listening> {
  const log = createLogger('mcp-gateway', config.logLevel, undefined, config.logFormat);
  const tracing = await startServiceTracing('mcp-gateway', config, log);
  const security = securityFor(config, 'mcp-gateway');
  const backends: Record<string, Backend> = {
    'tool-server': toolServerBackend({
      baseUrl: config.tools.url,
      headers: config.tools.token ? { authorization: `Bearer ${config.tools.token}` } : undefined,
    }),
  };
  const onWriteError = (err: unknown) => log.error({ err }, 'an audit row could not be written');
  // PostgreSQL when DATABASE_URL names one (shared by every replica), else SQLite in the data directory; an
  // older database is brought to the current schema first (store/migrations.ts).
  const state = await openGatewayState(
    config.databaseUrl
      ? { databaseUrl: config.databaseUrl }
      : { file: path.join(config.dataDir, 'gateway.db') },
    { onWriteError },
  );
  // The data directory holds what toolset files put there (${TOOLSHIFT_DATA_DIR}), whichever database is used.
  try {
    writableDataDir(config.dataDir);
  } catch (err) {
    await state.close();
    throw err;
  }
  const { store } = state;
  const closeStore = () => state.close();
  // ${TOOLSHIFT_DATA_DIR} and ${TOOLSETS_DIR} in toolset files are the resolved config values, set or not.
  const vars = toolsetVariables({ dataDir: config.dataDir, toolsetsDir: config.gateway.toolsetsDir });
  const dir = config.gateway.toolsetsDir;
  // The shipped toolsets, then the user's own (USER_TOOLSETS_DIR, where `toolsets import` writes).
  const userDir = config.gateway.userToolsetsDir;
  // This replica's stdio servers: bounded, and stopped when unused (upstream-pool.ts).
  const pool = new UpstreamPool({
    maxProcesses: config.gateway.upstream.maxProcesses,
    idleMs: config.gateway.upstream.idleMs,
    log,
  });
  let catalog: Catalog;
  try {
    const loaded = loadToolsets({ dir, userDir }, vars);
    for (const warning of loaded.warnings) log.warn({ warning }, 'a user toolset file is skipped');
    for (const o of loaded.overrides) log.info(o, 'a user toolset replaces the shipped one with its id');
    catalog = await buildCatalog(loaded.specs, backends, {
      waitMs: opts.backendWaitMs ?? 15_000,
      store,
      log,
      connection: {
        maxMessageBytes: config.gateway.upstream.maxMessageBytes,
        maxResultBytes: config.gateway.upstream.maxResultBytes,
        maxConcurrentCalls: config.gateway.upstream.maxConcurrentCalls,
        maxCallsPerSession: config.gateway.upstream.maxCallsPerSession,
        pool,
      },
      // A reload sees variables added to .env since the start (a changed value needs a restart).
      source: {
        dir,
        userDir,
        vars: () => toolsetVariables({ dataDir: config.dataDir, toolsetsDir: dir }, readEnv()),
      },
    });
  } catch (err) {
    pool.close();
    await closeStore();
    throw err;
  }
  const metrics = createMetrics({ processMetrics: true });
  let ceiling: Ceiling;
  const approvalOptions = { timeoutMs: config.gateway.approvalTimeoutMs };
  const approvals = approvalStore(state.approvals, approvalOptions);
  try {
    ceiling = createCeiling({
      policyFile: config.gateway.policyFile,
      approvals,
      limits: config.gateway.limits,
      audit: (entry) => store.audit(entry, currentActor()),
    });
  } catch (err) {
    await catalog.close();
    pool.close();
    await closeStore();
    throw err;
  }
  // Loaded now (about a second, once per thread) so the first activation does not wait for it.
  const tokens = createTokenCounter(config.tokenizer);
  tokens.text('warm');
  const { callKeys } = state;
  const gateway = instrumentGateway(
    createGateway({
      ceiling,
      callKeys,
      catalog,
      store,
      log,
      tokens,
      toolTokenBudget: config.gateway.toolTokenBudget,
    }),
    metrics,
  );
  const prompts = createPromptCatalog(config.gateway.promptsDir);
  for (const warning of prompts.warnings()) log.warn({ warning }, 'a prompt file is skipped');
  const policyError = ceiling.policy().error;
  if (policyError) log.error({ error: policyError }, 'the policy file does not load: everything is denied');
  // A deleted handle (evicted or expired) takes its gateway session with it.
  const handleOptions = {
    idleMs: config.gateway.mcp.handleIdleMs,
    onDrop: (ids: string[]) => store.dropSessions(ids),
  };
  const handles = handleStore(state.handles, handleOptions);
  const face = createMcpFace({
    gateway,
    prompts,
    handles,
    legacyStore: legacySessionStore(state.legacy),
    sessionIdleMs: config.gateway.mcp.sessionIdleMs,
    maxSessions: config.gateway.mcp.maxSessions,
    onError: (err) => log.warn({ err: err.message }, 'MCP face'),
  });
  // An upstream server's tools changed (list_changed, a withheld definition): MCP clients hear of it.
  // Telling MCP clients is best effort: a client gone meanwhile costs a warning, never the process.
  const told = (work: Promise<unknown>): void => {
    work.catch((err: Error) => log.warn({ err: err.message }, 'MCP clients not told of a change'));
  };
  gateway.onCatalogChange(() => told(face.announce()));
  // Another replica's change: the ceiling or the defaults (everyone's tools may have changed), a session's
  // toolsets (its MCP clients here hear list_changed), approved pins (released here too).
  const stopListening = state.listen((change) => {
    if (change.kind === 'settings') told(face.announce());
    else if (change.kind === 'session') told(face.toolsChangedIn(change.id));
    else
      catalog
        .repinned(change.id)
        .catch((err: Error) =>
          log.warn({ toolset: change.id, err: err.message }, 'pins approved elsewhere not read'),
        );
  });
  const app = createGatewayApp({ gateway, backends, log, security, face, prompts, metrics });
  const listening = await listen(app, config.gateway.port, config.host, 'GATEWAY_PORT', config.http.limits);
  // The CLI finds the gateway here, and sends it the stored tokens only here.
  await recordListening(config, 'mcp-gateway', listening.url, log);
  log[opts.announce === false ? 'debug' : 'info'](
    { url: listening.url, toolsets: catalog.toolsets.map((t) => t.id) },
    'mcp-gateway listening',
  );
  const retention = startRetention(
    gatewayRetentionRules(config.retention, { store, approvals, handles, callKeys }),
    {
      intervalMs: config.retention.intervalMs,
      log,
    },
  );
  return {
    ...listening,
    close: async () => {
      await listening.close();
      await retention.stop();
      await face.close();
      await catalog.close();
      pool.close();
      await stopListening();
      await closeStore();
      await tracing?.shutdown();
    },
  };
}

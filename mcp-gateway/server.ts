import path from 'node:path';
import { recordListening } from '../lib/config/addresses.ts';
import { type Config, readEnv } from '../lib/config/config.ts';
import { startRetention } from '../lib/db/retention.ts';
import { writableDataDir } from '../lib/db/sqlite.ts';
import { securityFor } from '../lib/http/security.ts';
import { type Listening, listen } from '../lib/http/serve.ts';
import { type Sealer, sealer as sealerOf } from '../lib/identity/sealed.ts';
import { type IdentityStore, openIdentity, teamCeilingOf } from '../lib/identity/store.ts';
import { createLogger, type Logger } from '../lib/telemetry/log.ts';
import { createMetrics, type Metrics } from '../lib/telemetry/metrics.ts';
import { createTokenCounter } from '../lib/telemetry/tokens.ts';
import { startServiceTracing } from '../lib/telemetry/trace-setup.ts';
import type { ToolServerLocal } from '../tool-server/contract.ts';
import { createGatewayApp } from './app.ts';
import { currentActor } from './audit-context.ts';
import type { Backend } from './backends/backend.ts';
import { type GrantEvent, OAuthAccounts } from './backends/oauth-accounts.ts';
import { localToolServerBackend, toolServerBackend } from './backends/tool-server-backend.ts';
import { UpstreamPool } from './backends/upstream-pool.ts';
import { buildCatalog, type Catalog, loadToolsets } from './catalog/catalog.ts';
import type { PersonalGrants, PersonalValues } from './catalog/personal.ts';
import { createPromptCatalog, type PromptCatalog } from './catalog/prompts.ts';
import { toolsetVariables } from './catalog/toolset-files.ts';
import { approvalStore } from './ceiling/approvals.ts';
import { createCeiling } from './ceiling/ceiling.ts';
import { teamPoliciesOf } from './ceiling/team-policy.ts';
import type { GatewayLocal } from './contract.ts';
import { createGateway } from './core/gateway.ts';
import type { Gateway } from './core/interface.ts';
import { instrumentGateway } from './core/metrics.ts';
import { createMcpFace, type McpFace } from './face/face.ts';
import { handleStore } from './face/handles.ts';
import { legacySessionStore } from './face/legacy-store.ts';
import { localGateway } from './local.ts';
import type { AuditEntry } from './store/audit.ts';
import type { GatewayState } from './store/interface.ts';
import { startLearner } from './store/learned-keywords.ts';
import { gatewayRetentionRules } from './store/retention.ts';
import { openGatewayState } from './store/store.ts';

/**
 * Loads and checks the catalog against the backends, opens the state store, and listens. `announce: false`
 * (start/start.ts, which prints one ready line for the three services) logs where it listens at debug only.
 */
export async function startGateway(
  config: Config,
  opts: { backendWaitMs?: number; announce?: boolean; toolServer?: ToolServerLocal } = {},
): Promise<Listening & { local: GatewayLocal }> {
  const log = createLogger('mcp-gateway', config.logLevel, undefined, config.logFormat);
  const tracing = await startServiceTracing('mcp-gateway', config, log);
  const security = securityFor(config, 'mcp-gateway');
  // Users' keys are taken beside the tokens; the operator manages them here (admin/identity.ts).
  const identity = openIdentity({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }, 'mcp-gateway');
  await identity.store.ready;
  security.identity = { store: identity.store, service: 'mcp-gateway' };
  const backends = backendsFor(config, opts.toolServer);
  const state = await openState(config, log);
  const { store, callKeys } = state;
  const own = ownAccounts(config, identity.store, log, (entry) => store.audit(entry, currentActor()));
  // This replica's stdio servers: bounded, and stopped when unused (upstream-pool.ts).
  const pool = new UpstreamPool({
    maxProcesses: config.gateway.upstream.maxProcesses,
    idleMs: config.gateway.upstream.idleMs,
    log,
  });
  const catalog = await undoneOnFailure(
    () => openCatalog(config, { backends, state, pool, log, own, waitMs: opts.backendWaitMs ?? 15_000 }),
    async () => {
      pool.close();
      await state.close();
    },
  );
  const metrics = createMetrics({ processMetrics: true });
  const approvals = approvalStore(state.approvals, { timeoutMs: config.gateway.approvalTimeoutMs });
  const ceiling = await undoneOnFailure(
    async () =>
      createCeiling({
        policyFile: config.gateway.policyFile,
        approvals,
        limits: config.gateway.limits,
        audit: (entry) => store.audit(entry, currentActor()),
        teamPolicies: teamPoliciesOf(identity.store),
      }),
    async () => {
      await catalog.close();
      pool.close();
      await state.close();
    },
  );
  const gateway = rulesOf(config, { ceiling, callKeys, catalog, store, log }, identity.store, metrics);
  const prompts = createPromptCatalog(config.gateway.promptsDir);
  for (const warning of prompts.warnings()) log.warn({ warning }, 'a prompt file is skipped');
  const policyError = ceiling.policy().error;
  if (policyError) log.error({ error: policyError }, 'the policy file does not load: everything is denied');
  const { face, handles } = openFace(config, { gateway, state, prompts, log });
  const stopListening = relayChanges({ gateway, state, face, catalog, log });
  const app = createGatewayApp({
    gateway,
    backends,
    log,
    security,
    face,
    prompts,
    metrics,
    identity: identity.store,
    ...(own.sealer
      ? { accounts: { ...own, sealer: own.sealer, catalog, connectUrl: connectUrlOf(config) } }
      : {}),
  });
  const listening = await listen(app, config.gateway.port, config.host, 'GATEWAY_PORT', config.http.limits);
  // The CLI finds the gateway here, and sends it the stored tokens only here.
  await recordListening(config, 'mcp-gateway', listening.url, log);
  log[opts.announce === false ? 'debug' : 'info'](
    { url: listening.url, toolsets: catalog.toolsets.map((t) => t.id) },
    'mcp-gateway listening',
  );
  const learner = learning(config, catalog, store, log);
  const retention = startRetention(
    gatewayRetentionRules(config.retention, { store, approvals, handles, callKeys, usage: identity.store }),
    { intervalMs: config.retention.intervalMs, log },
  );
  return {
    ...listening,
    local: localGateway({ gateway, app, face, security, log }),
    close: async () => {
      await listening.close();
      await retention.stop();
      await learner?.stop();
      await face.close();
      await catalog.close();
      pool.close();
      await stopListening();
      await state.close();
      await identity.release();
      await tracing?.shutdown();
    },
  };
}

/** Discovery learning from this deployment's use (DISCOVERY_LEARNING); off, it ranks with the toolset files alone. */
export function learning(config: Config, catalog: Catalog, store: GatewayState['store'], log: Logger) {
  if (!config.gateway.discoveryLearning) return undefined;
  return startLearner({
    store,
    toolsetOf: (tool) => catalog.tools.get(tool)?.toolset,
    apply: (learned) => catalog.setLearned(learned),
    log,
  });
}

/** The gateway's rules over its parts, measured, the teams' ceilings applied. */
function rulesOf(
  config: Config,
  parts: Pick<Parameters<typeof createGateway>[0], 'ceiling' | 'callKeys' | 'catalog' | 'store' | 'log'>,
  identity: IdentityStore,
  metrics: Metrics,
) {
  // Loaded now (about a second, once per thread) so the first activation does not wait for it.
  const tokens = createTokenCounter(config.tokenizer);
  tokens.text('warm');
  const toolTokenBudget = config.gateway.toolTokenBudget;
  const teamCeiling = teamCeilingOf(identity);
  return instrumentGateway(
    createGateway({
      ...parts,
      tokens,
      toolTokenBudget,
      teamCeiling,
      autoActivate: config.gateway.autoActivate,
    }),
    metrics,
  );
}

/** The native backends: the tool-server in this process (no socket), or over HTTP with its token when one is set. */
function backendsFor(config: Config, local?: ToolServerLocal): Record<string, Backend> {
  if (local) return { 'tool-server': localToolServerBackend(local) };
  return {
    'tool-server': toolServerBackend({
      baseUrl: config.tools.url,
      headers: config.tools.token ? { authorization: `Bearer ${config.tools.token}` } : undefined,
    }),
  };
}

/** What `work` made, or its error once `undo` put back what was opened before it. */
async function undoneOnFailure<T>(work: () => Promise<T>, undo: () => Promise<void>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    await undo();
    throw err;
  }
}

/**
 * PostgreSQL when DATABASE_URL names one (shared by every replica), else SQLite in the data directory; an
 * older database is brought to the current schema first (store/migrations.ts).
 */
async function openState(config: Config, log: Logger): Promise<GatewayState> {
  const onWriteError = (err: unknown) => log.error({ err }, 'an audit row could not be written');
  const state = await openGatewayState(
    config.databaseUrl
      ? { databaseUrl: config.databaseUrl }
      : { file: path.join(config.dataDir, 'gateway.db') },
    { onWriteError },
  );
  // The data directory holds what toolset files put there (${TOOLSHIFT_DATA_DIR}), whichever database is used.
  await undoneOnFailure(
    async () => writableDataDir(config.dataDir),
    () => state.close(),
  );
  return state;
}

/** The shipped toolsets, then the user's own (USER_TOOLSETS_DIR, where `toolsets import` writes), over the backends. */
async function openCatalog(
  config: Config,
  deps: {
    backends: Record<string, Backend>;
    state: GatewayState;
    pool: UpstreamPool;
    log: Logger;
    waitMs: number;
    own: { personal?: PersonalValues; grants?: PersonalGrants };
  },
): Promise<Catalog> {
  const { log } = deps;
  const dir = config.gateway.toolsetsDir;
  const userDir = config.gateway.userToolsetsDir;
  // ${TOOLSHIFT_DATA_DIR} and ${TOOLSETS_DIR} in toolset files are the resolved config values, set or not.
  const vars = toolsetVariables({ dataDir: config.dataDir, toolsetsDir: dir });
  const loaded = loadToolsets({ dir, userDir }, vars);
  for (const warning of loaded.warnings) log.warn({ warning }, 'a user toolset file is skipped');
  for (const o of loaded.overrides) log.info(o, 'a user toolset replaces the shipped one with its id');
  const { upstream } = config.gateway;
  return buildCatalog(loaded.specs, deps.backends, {
    waitMs: deps.waitMs,
    store: deps.state.store,
    ...(deps.own.personal ? { personal: deps.own.personal } : {}),
    ...(deps.own.grants ? { grants: deps.own.grants } : {}),
    connectUrl: connectUrlOf(config),
    log,
    connection: {
      maxMessageBytes: upstream.maxMessageBytes,
      maxResultBytes: upstream.maxResultBytes,
      maxConcurrentCalls: upstream.maxConcurrentCalls,
      maxCallsPerSession: upstream.maxCallsPerSession,
      pool: deps.pool,
    },
    // A reload sees variables added to .env since the start (a changed value needs a restart).
    source: {
      dir,
      userDir,
      vars: () => toolsetVariables({ dataDir: config.dataDir, toolsetsDir: dir }, readEnv()),
    },
  });
}

/** The MCP face, over the handles and legacy sessions kept in the state. */
function openFace(
  config: Config,
  deps: { gateway: Gateway; state: GatewayState; prompts: PromptCatalog; log: Logger },
) {
  const { state, log } = deps;
  // A deleted handle (evicted or expired) takes its gateway session with it.
  const handles = handleStore(state.handles, {
    idleMs: config.gateway.mcp.handleIdleMs,
    onDrop: (ids: string[]) => state.store.dropSessions(ids),
  });
  const face = createMcpFace({
    gateway: deps.gateway,
    prompts: deps.prompts,
    handles,
    legacyStore: legacySessionStore(state.legacy),
    sessionIdleMs: config.gateway.mcp.sessionIdleMs,
    maxSessions: config.gateway.mcp.maxSessions,
    onError: (err) => log.warn({ err: err.message }, 'MCP face'),
  });
  return { face, handles };
}

/** Tells MCP clients of changes, this replica's and the others'; returns the stop of listening to the others. */
function relayChanges(deps: {
  gateway: Gateway;
  state: GatewayState;
  face: McpFace;
  catalog: Catalog;
  log: Logger;
}): () => Promise<void> {
  const { face, log } = deps;
  // An upstream server's tools changed (list_changed, a withheld definition): MCP clients hear of it.
  // Telling MCP clients is best effort: a client gone meanwhile costs a warning, never the process.
  const told = (work: Promise<unknown>): void => {
    work.catch((err: Error) => log.warn({ err: err.message }, 'MCP clients not told of a change'));
  };
  deps.gateway.onCatalogChange(() => told(face.announce()));
  // Another replica's change: the ceiling or the defaults (everyone's tools may have changed), a session's
  // toolsets (its MCP clients here hear list_changed), approved pins (released here too).
  return deps.state.listen((change) => {
    if (change.kind === 'settings') told(face.announce());
    else if (change.kind === 'session') told(face.toolsChangedIn(change.id));
    else
      deps.catalog
        .repinned(change.id)
        .catch((err: Error) =>
          log.warn({ toolset: change.id, err: err.message }, 'pins approved elsewhere not read'),
        );
  });
}

/**
 * People's own upstream accounts, sealed with GATEWAY_SEAL_KEY: their values of toolsets' user_secrets and their
 * OAuth grants (backends/oauth-accounts.ts), and how calls find them (`user:<id>`, as the audit's for_user says it).
 */
function ownAccounts(
  config: Config,
  identity: IdentityStore,
  log: Logger,
  audit: (entry: AuditEntry) => void,
): { sealer?: Sealer; personal?: PersonalValues; grants?: PersonalGrants; oauth?: OAuthAccounts } {
  if (!config.gateway.sealKey) return {};
  const sealer = sealerOf(config.gateway.sealKey);
  // Each grant given and dropped is audited: the toolset and scopes, never a token.
  const onEvent = (e: GrantEvent) =>
    audit({
      session_id: null,
      kind: e.kind,
      subject: e.toolset,
      ok: e.ok,
      detail: `scopes: ${e.scopes.join(' ') || '(none)'}${e.detail ? `; ${e.detail}` : ''}`,
    });
  const oauth = new OAuthAccounts({ identity, sealer, log, onEvent });
  const id = (forUser: string) => forUser.slice('user:'.length);
  return {
    sealer,
    oauth,
    personal: { valuesFor: (forUser, toolset) => identity.secretsFor(sealer, id(forUser), toolset) },
    grants: {
      scopesOf: (forUser, toolset) => oauth.scopesOf(id(forUser), toolset),
      auth: (forUser, toolset) => oauth.auth(id(forUser), toolset, connectUrlOf(config)(toolset)),
      drop: (forUser, toolset, why) => oauth.drop(id(forUser), toolset, why),
    },
  };
}

/** Where a person connects their own account for a toolset: the console's page for it. */
const connectUrlOf = (config: Config) => (toolset: string) =>
  `${config.agent.url.replace(/\/$/, '')}/console/connect/${encodeURIComponent(toolset)}`;

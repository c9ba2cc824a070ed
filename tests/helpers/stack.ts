import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Hono } from 'hono';
import { afterAll } from 'vitest';
import { createAgentApp } from '../../agent-server/app.ts';
import { createGatewayClient } from '../../agent-server/clients/gateway.ts';
import type { Model } from '../../agent-server/clients/model.ts';
import type { ToolExposure } from '../../agent-server/contract.ts';
import { createPostgresTaskStore, createTaskStore } from '../../agent-server/store/store.ts';
import { createAgent } from '../../agent-server/tasks/agent.ts';
import type { AgentDeps } from '../../agent-server/tasks/deps.ts';
import type { WebhookGuard } from '../../agent-server/webhooks/guard.ts';
import { sqliteDb } from '../../lib/db/kysely.ts';
import { openPostgres } from '../../lib/db/postgres.ts';
import { openDatabase } from '../../lib/db/sqlite.ts';
import type { McpOAuth } from '../../lib/http/oauth-resource.ts';
import type { Role, Security } from '../../lib/http/security.ts';
import { sealer } from '../../lib/identity/sealed.ts';
import { IdentityStore, teamCeilingOf } from '../../lib/identity/store.ts';
import { createLogger, type Logger } from '../../lib/telemetry/log.ts';
import { createGatewayApp } from '../../mcp-gateway/app.ts';
import { currentActor } from '../../mcp-gateway/audit-context.ts';
import { localToolServerBackend, toolServerBackend } from '../../mcp-gateway/backends/tool-server-backend.ts';
import { buildCatalog, loadToolsets } from '../../mcp-gateway/catalog/catalog.ts';
import { createPromptCatalog } from '../../mcp-gateway/catalog/prompts.ts';
import { toolsetVariables } from '../../mcp-gateway/catalog/toolset-files.ts';
import { approvalStore } from '../../mcp-gateway/ceiling/approvals.ts';
import { createCeiling, type Limits } from '../../mcp-gateway/ceiling/ceiling.ts';
import { teamPoliciesOf } from '../../mcp-gateway/ceiling/team-policy.ts';
import { createGateway } from '../../mcp-gateway/core/gateway.ts';
import { createMcpFace } from '../../mcp-gateway/face/face.ts';
import { handleStore } from '../../mcp-gateway/face/handles.ts';
import { legacySessionStore } from '../../mcp-gateway/face/legacy-store.ts';
import { localGateway } from '../../mcp-gateway/local.ts';
import { openGatewayState } from '../../mcp-gateway/store/store.ts';
import { createToolServerApp, localToolServer } from '../../tool-server/app.ts';
import { createCallRecord } from '../../tool-server/call-record.ts';
import { PathGuard } from '../../tool-server/guards/paths/guard.ts';
import { createRegistry } from '../../tool-server/registry.ts';
import { nativeTools } from '../../tool-server/tools/native.ts';
import { freshDatabase } from './postgres.ts';

export const log = createLogger('test', 'silent');
/** What a stack seals people's own upstream values with. */
const stackSealer = sealer('a-seal-key-for-the-test-stacks-only-0123456789');
const silent = log;

/** The request policy of a loopback-only service without tokens (the default setup). */
export const openSecurity: Security = {
  tokens: [],
  allowedHosts: [],
  allowedOrigins: [],
  listenHost: '127.0.0.1',
};

/** A policy accepting the given tokens, as securityFor() builds from config. */
export function tokenSecurity(tokens: Partial<Record<Role, string>>): Security {
  const variables: Record<Role, string> = {
    admin: 'GATEWAY_ADMIN_TOKEN',
    agent: 'GATEWAY_AGENT_TOKEN',
    gateway: 'TOOL_SERVER_TOKEN',
    user: 'AGENT_API_TOKEN',
    mcp: 'GATEWAY_MCP_TOKEN',
    approver: 'AGENT_API_TOKEN',
    viewer: 'VIEWER_TOKEN',
  };
  return {
    ...openSecurity,
    tokens: Object.entries(tokens).flatMap(([role, token]) =>
      token ? [{ role: role as Role, token, variable: variables[role as Role] }] : [],
    ),
  };
}

const bearer = (token: string | undefined) => (token ? { authorization: `Bearer ${token}` } : undefined);

// better-sqlite3 12 built against Node 24's headers aborts the process when V8 garbage-collects a
// prepared statement outside a JS context ("Assertion failed: (env) != nullptr"). A running service
// keeps its stores for its whole life, but these tests drop dozens; holding them here keeps their
// statements from ever being collected mid-run. Closing still happens in close().
const retained: unknown[] = [];

/** Keeps better-sqlite3 objects a test made itself from being collected (see above). */
export function retain(...objects: unknown[]): void {
  retained.push(...objects);
}

/** A fetch that serves `app` in-process, for clients that take {baseUrl, fetch}. */
export function fetchOf(app: Hono) {
  return async (input: string, init?: RequestInit) => app.request(asLoopback(input), init);
}

/** The same URL on 127.0.0.1: in-process services get a loopback Host, as they would over a real socket. */
export function asLoopback(url: string): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  return u.toString();
}

/** Two toolsets splitting the file tools, for tests that need more than one. */
export const SPLIT_TOOLSETS = {
  'fs_read.yaml': `id: fs_read
description: Read files and list directories.
default: false
tools: [read_text_file, list_directory, search_files]
`,
  'fs_write.yaml': `id: fs_write
description: Create and change files.
default: false
tools: [write_file, edit_file, delete_file]
`,
};

export interface StackOptions {
  model?: Model;
  /** Sees each request of the agent-server to the gateway, and decides when (and whether) it goes on. */
  interceptGateway?: (request: Request, next: () => Promise<Response>) => Promise<Response>;
  /** The same for the gateway's requests to the tool-server. */
  interceptToolServer?: (request: Request, next: () => Promise<Response>) => Promise<Response>;
  /** How often a stream of a task running elsewhere reads the store besides notifications. */
  streamPollMs?: number;
  /** The task store's lease (ms) and worker name. */
  lease?: { ms?: number; holder?: string };
  /** AUTO_ACTIVATE (default on): a call of an inactive toolset's tool activates it first. */
  autoActivate?: boolean;
  /** Toolset files to write into a temp toolsets dir; default: the repo's own toolsets/. */
  toolsets?: Record<string, string>;
  dataDir?: string;
  /** Tokens of the services: admin/agent (gateway), gateway (tool-server, presented by the gateway), user (agent API). */
  tokens?: Partial<Record<Role, string>>;
  maxSteps?: number;
  /** The services' logger (default: silent). */
  log?: Logger;
  /** Extra variables for `${VAR}` in toolset files (on top of the process environment). */
  vars?: Record<string, string>;
  /** Upstream MCP connection timeouts and limits. */
  connection?: {
    connectTimeoutMs?: number;
    livenessTimeoutMs?: number;
    maxMessageBytes?: number;
    maxResultBytes?: number;
    maxConcurrentCalls?: number;
    maxCallsPerSession?: number;
  };
  /** Tasks that may run at once (default 4). */
  maxConcurrentTasks?: number;
  /** Tasks that may wait for a slot (default 1000; 0: a busy agent answers 503). */
  maxQueuedTasks?: number;
  /** How often the agent looks for queued tasks in the store (default 1 s). */
  queuePollMs?: number;
  /** The most legacy MCP sessions open at once (default 256). */
  mcpMaxSessions?: number;
  /** The operator's policy (POLICY_FILE's YAML); default: none, everything allowed. */
  policy?: string;
  approvalTimeoutMs?: number;
  /** How long a task waits for its owner's consent (CONSENT_TIMEOUT_S; default 1 hour). */
  consentTimeoutS?: number;
  limits?: Partial<Limits>;
  /** Playbook prompts; default: the repo's own prompts/. */
  promptsDir?: string;
  /** Idle lifetime of MCP handles, and the clock they are judged by. */
  handleIdleMs?: number;
  now?: () => number;
  /** The file tools' guard (default: one read-write root, the stack's temp workspace). */
  paths?: PathGuard;
  /** PostgreSQL for the agent-server's tasks (as DATABASE_URL); default: SQLite in the data dir. */
  databaseUrl?: string;
  /** The gateway the agent calls: another stack's, for a second agent-server beside it (default: its own). */
  gatewayApp?: Hono;
  /**
   * Goal-primed toolsets (AGENT_PRIME_TOOLSETS). Off unless a test asks: the scripts of other tests say exactly
   * what the model activates, which priming would change (tests/agent-server/loop/prime.test.ts tests it).
   */
  prime?: boolean;
  /** TOOL_EXPOSURE (default native here: most tests are about it) and AUTO_EXPOSURE_TOKENS. */
  exposure?: ToolExposure;
  autoExposureTokens?: number;
  /** The model's context budget in tokens (AGENT_CONTEXT_TOKENS). */
  contextTokens?: number;
  /** Where tasks' webhooks may go (agent-server/webhooks/guard.ts); default: none (a task naming one is refused). */
  webhooks?: WebhookGuard;
  /** The limits a thread owner's tasks count against (agent-server/tasks/deps.ts quotaOf). */
  quotaOf?: AgentDeps['quotaOf'];
  /** Users' keys on both services (lib/identity, its identity.db in the data dir) and the gateway's admin routes for them; default on. */
  identity?: boolean;
  /** The gateway's /mcp as an OAuth protected resource (lib/http/oauth-resource.ts); default: none. */
  oauth?: McpOAuth;
}

/** Every stack's temp directory made by the current test file, removed after its last test (kept until then for restarts). */
const made = new Set<string>();
// Only under vitest: `npm run bench` builds stacks with this helper too, outside any test file.
if (process.env.VITEST) {
  afterAll(async () => {
    for (const dir of made) await rm(dir, { recursive: true, force: true });
    made.clear();
  });
}

/** Each data dir's PostgreSQL database, when the tests run on PostgreSQL (a restart on the same dir finds it). */
const databases = new Map<string, string>();

/** The database of a stack on `dataDir` (tasks and the gateway's state): none (SQLite) unless TOOLSHIFT_TEST_STORE=postgres. */
export async function testDatabaseFor(dataDir: string): Promise<string | undefined> {
  if (process.env.TOOLSHIFT_TEST_STORE !== 'postgres') return undefined;
  const known = databases.get(dataDir);
  if (known) return known;
  const url = await freshDatabase('stack');
  databases.set(dataDir, url);
  return url;
}

/** The three apps wired in-process through app.request (no ports), on a temp workspace and data dir. */
export async function makeStack(opts: StackOptions = {}) {
  const log = opts.log ?? silent;
  const tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-'));
  made.add(tmp);
  const root = path.join(tmp, 'workspace');
  const dataDir = opts.dataDir ?? path.join(tmp, 'data');
  let toolsetsDir = path.resolve('toolsets');
  if (opts.toolsets) {
    toolsetsDir = await mkdtemp(path.join(tmp, 'toolsets-'));
    for (const [name, text] of Object.entries(opts.toolsets))
      await writeFile(path.join(toolsetsDir, name), text);
  }
  const paths = opts.paths ?? (await PathGuard.create({ roots: [root], readOnlyRoots: [] }));
  const toolDeps = {
    registry: createRegistry(nativeTools),
    context: { paths, maxReadBytes: 64 * 1024 },
    log,
    security: tokenSecurity({ gateway: opts.tokens?.gateway }),
    calls: createCallRecord(),
  };
  const toolApp = createToolServerApp(toolDeps);
  // As `npm start` links them (start/stack.ts): each service calls the next in-process, unless the run asks for
  // the HTTP way (TOOLSHIFT_TEST_LINK=http: the postgres project runs the same suites so) or the test
  // intercepts the requests between them.
  const overHttp = process.env.TOOLSHIFT_TEST_LINK === 'http';
  const backends = {
    'tool-server':
      !overHttp && !opts.interceptToolServer
        ? localToolServerBackend(localToolServer(toolDeps))
        : toolServerBackend({
            baseUrl: 'http://tool-server',
            fetch: opts.interceptToolServer
              ? (input, init) =>
                  (opts.interceptToolServer as NonNullable<StackOptions['interceptToolServer']>)(
                    new Request(asLoopback(input), init),
                    () => fetchOf(toolApp)(input, init),
                  )
              : fetchOf(toolApp),
            headers: bearer(opts.tokens?.gateway),
          }),
  };
  // PostgreSQL for the gateway's state and the tasks when the run says so (TOOLSHIFT_TEST_STORE), else SQLite.
  const databaseUrl = opts.databaseUrl ?? (await testDatabaseFor(dataDir));
  await mkdir(dataDir, { recursive: true });
  const gatewayState = await openGatewayState(
    databaseUrl ? { databaseUrl } : { file: path.join(dataDir, 'gateway.db') },
  );
  const gatewayStore = gatewayState.store;
  // ${VAR} in toolset files: the process environment plus the test's own, and this stack's data dir.
  const vars = toolsetVariables({ dataDir, toolsetsDir }, { ...process.env, ...opts.vars });
  // The user's toolsets, as the gateway reads them by default: <data dir>/toolsets, loaded after the shipped.
  const userToolsetsDir = path.join(dataDir, 'toolsets');
  const catalog = await buildCatalog(
    loadToolsets({ dir: toolsetsDir, userDir: userToolsetsDir }, vars).specs,
    backends,
    {
      store: gatewayStore,
      log,
      source: { dir: toolsetsDir, userDir: userToolsetsDir, vars: () => vars },
      connection: opts.connection,
      // Read at call time: the identity store is opened below.
      personal: {
        valuesFor: async (forUser: string, toolset: string) =>
          identity ? identity.secretsFor(stackSealer, forUser.slice('user:'.length), toolset) : {},
      },
    },
  );
  const policyFile = path.join(tmp, 'policy.yaml');
  if (opts.policy) await writeFile(policyFile, opts.policy);
  const approvalOptions = { timeoutMs: opts.approvalTimeoutMs ?? 600_000, now: opts.now };
  const approvals = approvalStore(gatewayState.approvals, approvalOptions);
  // As the services' server.ts wire it (identity: false leaves it out): keys taken beside the tokens, one
  // store for both, and the teams' ceilings.
  const identity =
    opts.identity !== false
      ? new IdentityStore(sqliteDb(openDatabase(path.join(dataDir, 'identity.db'))))
      : undefined;
  const ceiling = createCeiling({
    policyFile,
    approvals,
    limits: { callsPerMinute: 1000, activationsPerTask: 100, ...opts.limits },
    audit: (entry) => gatewayStore.audit(entry, currentActor()),
    now: opts.now,
    teamPolicies: identity && teamPoliciesOf(identity),
  });
  const { callKeys } = gatewayState;
  const gateway = createGateway({
    catalog,
    store: gatewayStore,
    log,
    ceiling,
    callKeys,
    teamCeiling: identity && teamCeilingOf(identity),
    autoActivate: opts.autoActivate,
  });
  const gatewaySecurity = tokenSecurity({
    admin: opts.tokens?.admin,
    agent: opts.tokens?.agent,
    mcp: opts.tokens?.mcp,
    approver: opts.tokens?.user,
  });
  const handleOptions = {
    idleMs: opts.handleIdleMs ?? 3_600_000,
    now: opts.now,
    // As mcp-gateway/server.ts wires it: a deleted handle takes its session with it.
    onDrop: (ids: string[]) => gatewayStore.dropSessions(ids),
  };
  const handles = handleStore(gatewayState.handles, handleOptions);
  const prompts = createPromptCatalog(opts.promptsDir ?? path.resolve('prompts'));
  const face = createMcpFace({
    gateway,
    handles,
    prompts,
    legacyStore: legacySessionStore(gatewayState.legacy),
    sessionIdleMs: 3_600_000,
    maxSessions: opts.mcpMaxSessions,
    now: opts.now,
  });
  if (identity) gatewaySecurity.identity = { store: identity, service: 'mcp-gateway' };
  gatewaySecurity.oauth = opts.oauth;
  const gatewayApp = createGatewayApp({
    gateway,
    backends,
    log,
    security: gatewaySecurity,
    face,
    prompts,
    identity,
    // People's own upstream values, as mcp-gateway/server.ts wires them (a key made for this stack).
    ...(identity ? { accounts: { sealer: stackSealer, catalog } } : {}),
  });
  const storeOptions = { leaseMs: opts.lease?.ms, holder: opts.lease?.holder };
  const taskStore = databaseUrl
    ? await createPostgresTaskStore(openPostgres(databaseUrl, 'test', { max: 4 }), storeOptions)
    : createTaskStore(openDatabase(path.join(dataDir, 'agent.db')), storeOptions);
  const toGateway = fetchOf(opts.gatewayApp ?? gatewayApp);
  const intercept = opts.interceptGateway;
  const linked =
    overHttp || intercept || opts.gatewayApp
      ? undefined
      : localGateway({ gateway, app: gatewayApp, face, security: gatewaySecurity, log });
  const agent = createAgent({
    store: taskStore,
    gateway: createGatewayClient(
      {
        baseUrl: 'http://gateway',
        fetch: intercept
          ? (input, init) => intercept(new Request(asLoopback(input), init), () => toGateway(input, init))
          : toGateway,
        headers: bearer(opts.tokens?.agent),
      },
      linked,
    ),
    model: opts.model,
    modelName: 'test-model',
    defaultMaxSteps: opts.maxSteps ?? 20,
    log,
    maxConcurrentTasks: opts.maxConcurrentTasks,
    maxQueuedTasks: opts.maxQueuedTasks,
    queuePollMs: opts.queuePollMs,
    approvalPollMs: 20,
    consentPollMs: 20,
    consentTimeoutS: opts.consentTimeoutS,
    prime: opts.prime ?? false,
    exposure: opts.exposure,
    autoExposureTokens: opts.autoExposureTokens,
    contextTokens: opts.contextTokens,
    webhooks: opts.webhooks,
    quotaOf: opts.quotaOf,
  });
  // As the agent-server does at start: tasks left paused by a previous stack go on waiting.
  await agent.resumeAll();
  const agentSecurity = tokenSecurity({ user: opts.tokens?.user, viewer: opts.tokens?.viewer });
  if (identity) agentSecurity.identity = { store: identity, service: 'agent-server' };
  const agentApp = createAgentApp({
    agent,
    store: taskStore,
    log,
    security: agentSecurity,
    streamPollMs: opts.streamPollMs,
  });
  retained.push(gatewayStore, taskStore, handles, identity);
  return {
    face,
    tmp,
    root,
    dataDir,
    toolsetsDir,
    userToolsetsDir,
    catalog,
    ceiling,
    gatewayStore,
    /** The gateway's state on its database: the store and the query sets beside it. */
    gatewayState,
    callKeys,
    policyFile,
    gateway,
    toolApp,
    gatewayApp,
    agentApp,
    agent,
    taskStore,
    /** The users, teams and keys (with `identity`). */
    identity,
    /** Commits the stores' queued writes (they commit a few milliseconds after they are written), for a test reading the files. */
    async flushWrites() {
      await gatewayStore.flush();
      await taskStore.flush();
    },
    /** POST JSON to an app and return status and parsed body. */
    post: (app: Hono, url: string, body: unknown, headers: Record<string, string> = {}) =>
      sendJson(app, 'POST', url, body, headers),
    /** PUT JSON, the same way. */
    put: (app: Hono, url: string, body: unknown, headers: Record<string, string> = {}) =>
      sendJson(app, 'PUT', url, body, headers),
    async get(app: Hono, url: string, headers: Record<string, string> = {}) {
      const res = await app.request(url, { headers });
      return { status: res.status, body: (await res.json()) as any };
    },
    async delete(app: Hono, url: string, headers: Record<string, string> = {}) {
      const res = await app.request(url, { method: 'DELETE', headers });
      return { status: res.status, body: (await res.json()) as any };
    },
    /** Closes the stores; `keepFiles` leaves the temp dirs for a restart test. */
    async close(keepFiles = false) {
      await agent.shutdown();
      await face.close();
      await catalog.close();
      await gatewayState.close();
      await taskStore.close();
      await identity?.close();
      if (!keepFiles) await rm(tmp, { recursive: true, force: true });
    },
  };
}

export type Stack = Awaited<ReturnType<typeof makeStack>>;

/** Sends JSON to an app; its status and parsed body. */
async function sendJson(
  app: Hono,
  method: string,
  url: string,
  body: unknown,
  headers: Record<string, string>,
) {
  const res = await app.request(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

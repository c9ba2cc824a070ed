import type { AuthProvider, Tool } from '@modelcontextprotocol/client';
import type { Logger } from '../../lib/telemetry/log.ts';
import { currentActor } from '../audit-context.ts';
import type { Backend } from '../backends/backend.ts';
import { mcpToolsetBackend } from '../backends/mcp-backend.ts';
import { ConsentNeeded, McpConnection, UpstreamError } from '../backends/mcp-connection.ts';
import type { Redactor } from '../backends/redactor.ts';
import {
  type CatalogTool,
  mcpRuntime,
  resolveCollisions,
  type schemaCompiler,
  type ToolsetRuntime,
  type WithheldTool,
} from './build.ts';
import type { CatalogOptions, Toolset } from './catalog-types.ts';
import { evict, MAX_PERSONAL, scopedTools, scopesFor } from './personal.ts';
import { definitionHash, type PinStore, pinnedShape } from './pins.ts';
import type { ToolsetIndex } from './search.ts';
import { CatalogError, type McpBackendSpec, type ToolsetSpec } from './toolset-files.ts';

// What the live catalog keeps (buildCatalog, catalog.ts, makes it once) and the changes every part of it makes:
// an upstream listing applied through the pins, a toolset's pins read again, the whole catalog installed.

export type McpToolsetSpec = ToolsetSpec & { backend: McpBackendSpec };

export const isMcp = (spec: ToolsetSpec): spec is McpToolsetSpec => typeof spec.backend !== 'string';

/** The catalog's state: what it was built with, and what it offers now (swapped whole by install). */
export interface CatalogState {
  readonly opts: CatalogOptions;
  readonly backends: Record<string, Backend>;
  readonly log: Logger;
  readonly store: PinStore;
  readonly compile: ReturnType<typeof schemaCompiler>;
  readonly connections: Map<string, McpConnection>;
  /** People's own connections (catalog/personal.ts), least recently used first. */
  readonly personal: Map<string, McpConnection>;
  /** The last listing of each connection, applied or being applied. */
  readonly applied: WeakMap<McpConnection, Tool[]>;
  readonly listeners: Set<(ids: string[]) => void>;
  specs: ToolsetSpec[];
  runtimes: Map<string, ToolsetRuntime>;
  toolsets: Toolset[];
  byId: Map<string, Toolset>;
  tools: Map<string, CatalogTool>;
  withheldByName: Map<string, WithheldTool & { toolset: string }>;
  /** The search index, built on the first search after an install or a change of the learned terms. */
  index: ToolsetIndex | undefined;
  /** Discovery's terms learned from use, per toolset (catalog/learned.ts); ranked, never shown. */
  learned: ReadonlyMap<string, readonly string[]>;
  reloading: boolean;
  /**
   * Changes of the catalog that read or write the store (a listing applied, pins approved or re-read, a
   * reload) run one after the other, each installing over what the one before installed.
   */
  tail: Promise<void>;
}

export function inTurn<T>(st: CatalogState, work: () => Promise<T>): Promise<T> {
  const run = st.tail.then(work);
  st.tail = run.then(
    () => undefined,
    () => undefined,
  );
  return run;
}

export function connectionFor(
  st: CatalogState,
  spec: McpBackendSpec,
  pool = st.connections,
  auth?: AuthProvider,
): McpConnection {
  let conn = pool.get(spec.key);
  if (!conn) {
    const { log } = st;
    conn = new McpConnection(spec.label, spec.server, {
      log,
      redactor: spec.redactor,
      ...st.opts.connection,
      ...(auth ? { auth } : {}),
    });
    const c = conn;
    conn.onToolsChanged((listing) => {
      if (st.connections.get(spec.key) !== c) return;
      applyListing(st, spec.key, c, listing).then(
        () => log.info({ upstream: spec.label }, 'upstream tools changed'),
        (err: Error) => log.warn({ upstream: spec.label, err: err.message }, 'upstream tools not applied'),
      );
    });
    pool.set(spec.key, conn);
  }
  return conn;
}

/**
 * The connection a call goes over and what its results are redacted of. A toolset whose variables each person may
 * set for themselves (`user_secrets`): a person's calls go over a connection of their own, the server filled with
 * their values over the shared ones (their own API key), their results redacted of those values too. A person
 * with none of their own uses the shared connection; one whose toolset needs a value the environment does not
 * share is told how to set theirs.
 */
export interface Route {
  connection: McpConnection;
  redactor: Redactor;
}

/**
 * The connection `forUser`'s call of `spec` goes over (the current actor's when not given); `tools`: the server's
 * tools it is for (an OAuth grant must hold their scopes; all the toolset's when not given).
 */
export async function routeOf(
  st: CatalogState,
  spec: McpToolsetSpec,
  forUser: string | undefined = currentActor().for_user,
  tools?: readonly string[],
): Promise<Route> {
  if (spec.backend.oauth) return oauthRoute(st, spec, forUser, tools);
  const personal = spec.backend.personal;
  const shared = () => ({ connection: connectionFor(st, spec.backend), redactor: spec.backend.redactor });
  if (!personal) return shared();
  const values: Record<string, string> =
    forUser && st.opts.personal ? await st.opts.personal.valuesFor(forUser, spec.id) : {};
  const missing = personal.unset.filter((name) => values[name] === undefined);
  if (missing.length > 0) {
    const how = forUser
      ? `set yours with: toolshift secrets set ${spec.id} ${missing[0]}`
      : `set ${missing.join(' and ')} in the gateway's environment, or each person sets their own (toolshift secrets set ${spec.id} ${missing[0]})`;
    const url = st.opts.connectUrl?.(spec.id);
    throw new ConsentNeeded(
      `Toolset ${spec.id} needs your own ${missing.join(' and ')} (nobody shares one): ${how}${url ? ` (or at ${url})` : ''}`,
      spec.id,
      url,
    );
  }
  if (!personal.names.some((name) => values[name] !== undefined)) return shared();
  const own = personal.serverWith(values);
  const backend: McpBackendSpec = spec.backend;
  const connection = connectionFor(st, { ...backend, ...own }, st.personal);
  const pool = st.personal;
  // Most recently used last: the map's order is its eviction order.
  pool.delete(own.key);
  pool.set(own.key, connection);
  if (pool.size > MAX_PERSONAL) await evict(pool);
  return { connection, redactor: own.redactor };
}

/**
 * An OAuth toolset's call: only a person's, over a connection of their own whose transport sends their token; a
 * person without a grant, or whose grant lacks a scope these tools need, is asked to connect (for those scopes).
 */
async function oauthRoute(
  st: CatalogState,
  spec: McpToolsetSpec,
  forUser: string | undefined,
  tools?: readonly string[],
): Promise<Route> {
  const oauth = spec.backend.oauth as NonNullable<McpBackendSpec['oauth']>;
  const needed = scopesFor(oauth, tools ?? scopedTools(oauth, spec.include));
  const grants = st.opts.grants;
  const granted = forUser && grants ? await grants.scopesOf(forUser, spec.id) : undefined;
  const lacking = needed.filter((s) => !granted?.includes(s));
  if (!forUser || !grants || !granted || lacking.length > 0) {
    const base = st.opts.connectUrl?.(spec.id);
    const ask = [...new Set([...(granted ?? []), ...needed])];
    const url = base && ask.length > 0 ? `${base}?scope=${encodeURIComponent(ask.join(' '))}` : base;
    const why = !forUser
      ? "its server takes each person's own account, and this call is nobody's (use a user's key)"
      : !granted
        ? 'connect your own account'
        : `your grant lacks ${lacking.join(', ')}: connect again to grant ${lacking.length > 1 ? 'them' : 'it'}`;
    throw new ConsentNeeded(`Toolset ${spec.id}: ${why}${url ? ` at ${url}` : ''}`, spec.id, url);
  }
  const key = `${spec.backend.key}\u0000oauth\u0000${spec.id}\u0000${forUser}`;
  const pool = st.personal;
  const backend: McpBackendSpec = spec.backend;
  const connection = connectionFor(st, { ...backend, key }, pool, grants.auth(forUser, spec.id));
  // Most recently used last: the map's order is its eviction order.
  pool.delete(key);
  pool.set(key, connection);
  if (pool.size > MAX_PERSONAL) await evict(pool);
  return { connection, redactor: spec.backend.redactor };
}

/** A person's own OAuth connection of a toolset: closed when their grant is dropped. */
export async function closeOwn(st: CatalogState, spec: McpToolsetSpec, forUser: string): Promise<void> {
  const key = `${spec.backend.key}\u0000oauth\u0000${spec.id}\u0000${forUser}`;
  const conn = st.personal.get(key);
  st.personal.delete(key);
  await conn?.close();
}

/**
 * An MCP toolset's runtime from a listing (null: the one stored, if any), writing first-sight pins and the
 * listing if `persist`: one read of what the store holds of it, then its pins and listing written.
 */
export async function mcpToolsetRuntime(
  st: CatalogState,
  spec: McpToolsetSpec,
  listing: Tool[] | null,
  persist: boolean,
  pool = st.connections,
) {
  const { store } = st;
  const conn = connectionFor(st, spec.backend, pool);
  const [stored, pinned] = await Promise.all([
    listing === null ? store.lastListing(spec.id) : null,
    spec.pin ? store.pins(spec.id) : null,
  ]);
  const definitions = listing?.map((t) => spec.backend.redactor.deep(pinnedShape(t))) ?? stored ?? [];
  const known = listing !== null || definitions.length > 0;
  let pins = pinned;
  if (persist && listing !== null) {
    if (spec.pin && pins === null) {
      await store.pin(
        spec.id,
        definitions.map((definition) => ({ hash: definitionHash(definition), definition })),
      );
      pins = null;
    }
    await store.saveListing(spec.id, definitions);
  }
  return mcpRuntime(
    spec,
    known ? definitions : null,
    pins,
    (names) =>
      mcpToolsetBackend({
        connection: conn,
        redactor: spec.backend.redactor,
        ...(spec.backend.personal || spec.backend.oauth
          ? { personal: (forUser, tool) => routeOf(st, spec, forUser, tool ? [tool] : undefined) }
          : {}),
        timeoutMs: spec.timeoutMs,
        maxResultBytes: st.opts.connection?.maxResultBytes,
        upstreamName: (exposed) => names.get(exposed),
      }),
    st.compile,
  );
}

/** Makes these the catalog's toolsets at once (names that collide skipped) and tells the listeners of `changed`. */
export function install(
  st: CatalogState,
  nextSpecs: ToolsetSpec[],
  nextRuntimes: Map<string, ToolsetRuntime>,
  changed: string[],
) {
  const offering = new Set(
    [...st.runtimes.values()].filter((rt) => rt.offered.length > 0).map((rt) => rt.spec.id),
  );
  const resolved = resolveCollisions(
    nextSpecs.map((s) => nextRuntimes.get(s.id) as ToolsetRuntime),
    offering,
  );
  st.specs = nextSpecs;
  st.runtimes = new Map(resolved.map((rt) => [rt.spec.id, rt]));
  st.toolsets = resolved.map((rt) => ({ ...rt.spec, tools: rt.offered.map((t) => t.definition.name) }));
  st.byId = new Map(st.toolsets.map((t) => [t.id, t]));
  st.tools = new Map(resolved.flatMap((rt) => rt.offered.map((t) => [t.definition.name, t] as const)));
  st.withheldByName = new Map(
    resolved.flatMap((rt) => rt.withheld.map((w) => [w.exposed, { ...w, toolset: rt.spec.id }] as const)),
  );
  st.index = undefined;
  if (changed.length > 0) for (const listener of st.listeners) listener(changed);
  return resolved;
}

/** Applies a server's listing to its toolsets (their pins judged, the listing stored); in turn with the others. */
function applyListing(st: CatalogState, key: string, conn: McpConnection, listing: Tool[]): Promise<void> {
  st.applied.set(conn, listing);
  return inTurn(st, async () => {
    // A newer listing of the same server came meanwhile: it is applied instead.
    if (st.applied.get(conn) !== listing) return;
    const mine = st.specs.filter((spec): spec is McpToolsetSpec => isMcp(spec) && spec.backend.key === key);
    const built = await Promise.all(mine.map((spec) => mcpToolsetRuntime(st, spec, listing, true)));
    const next = new Map(st.runtimes);
    const changed: string[] = [];
    mine.forEach((spec, i) => {
      // A reload meanwhile that dropped or replaced the toolset has the last word.
      if (!st.specs.includes(spec)) return;
      next.set(spec.id, built[i]);
      changed.push(spec.id);
    });
    install(st, st.specs, next, changed);
  });
}

/** Connects the upstreams of these toolsets and refreshes their tools; throws when one cannot offer any. */
export async function prepare(st: CatalogState, ids: readonly string[]): Promise<void> {
  for (const id of ids) {
    const spec = st.specs.find((s) => s.id === id);
    if (!spec || !isMcp(spec)) continue;
    let conn: McpConnection;
    try {
      conn = (await routeOf(st, spec)).connection;
    } catch (err) {
      if (err instanceof UpstreamError && !(err instanceof ConsentNeeded))
        throw new CatalogError(err.message);
      throw err;
    }
    const listing = await conn.listTools();
    // Applied (or being applied, by another request that got the same listing) before its tools are read.
    if (st.applied.get(conn) !== listing) await applyListing(st, spec.backend.key, conn, listing);
    else await st.tail;
    const error = st.runtimes.get(id)?.error;
    if (error) throw new CatalogError(error);
  }
}

/** Reads an MCP toolset's pins again and installs what they release (in turn with the catalog's other changes). */
export function repin(st: CatalogState, id: string): Promise<void> {
  return inTurn(st, async () => {
    const rt = st.runtimes.get(id);
    if (!rt || !isMcp(rt.spec)) return;
    const built = await mcpToolsetRuntime(st, rt.spec, null, false);
    if (st.runtimes.get(id)?.spec !== rt.spec) return;
    const next = new Map(st.runtimes);
    next.set(id, built);
    install(st, st.specs, next, [id]);
  });
}

import { randomBytes } from 'node:crypto';
import {
  isInitializeRequest,
  type Server,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import { FACE_SESSION_PREFIXES } from '../contract.ts';
import { Connection, type LegacyConnection } from './legacy-connection.ts';
import { type LegacyInit, type LegacySessionStore, legacySessionKey } from './legacy-store.ts';

export type { LegacyConnection };

// The legacy leg (MCP 2025-11-25 and earlier): one protocol session per client, with list_changed sent to
// that session alone when its toolsets change. A session acts in a gateway session of its own until its
// first change of toolsets, which takes a handle (handles.ts): from then on it acts in the handle's gateway
// session, which a later connection of the same credential can name, so per-invocation clients keep their
// toolsets. Sessions are bound to the credential that opened them, closed after an idle lifetime, and kept
// in the gateway's database (legacy-store.ts) so that a restart does not strand a client that goes on
// sending its Mcp-Session-Id.

interface LegacySession {
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  conn: Connection;
  /** The stored row's key (the SHA-256 of the session id). */
  key: string;
  lastSeen: number;
  /** When lastSeen was last written to the store. */
  savedSeen: number;
}

/** What LegacySessions needs. */
export interface LegacySessionsOptions {
  /** Builds the server of a session; `changed` sends it list_changed. */
  build: (conn: LegacyConnection, changed: () => void) => Server;
  /** Where sessions are kept across restarts. */
  store: LegacySessionStore;
  /** Idle lifetime of a session (MCP_SESSION_IDLE_S). */
  idleMs: number;
  /**
   * The most sessions one credential may hold open; beyond it that credential's least recently used session
   * idle for a minute is closed, else 503.
   */
  maxSessions?: number;
  now?: () => number;
  /**
   * Called with a session's own gateway session once the session has ended (DELETE /mcp, idle expiry,
   * eviction): it is deleted with its limits' counters. A handle the session took stays, for the handle's
   * own lifetime (MCP_HANDLE_IDLE_S): that is what a later connection names.
   */
  onEnd?: (gatewaySessionId: string) => Promise<void> | void;
}

/** How often a session's last use is written to the store at most (it is judged against MCP_SESSION_IDLE_S). */
const SAVE_SEEN_MS = 30_000;

const jsonRpcError = (status: number, code: number, message: string) =>
  new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), {
    status,
    headers: { 'content-type': 'application/json' },
  });

const newId = (prefix: string) => `${prefix}${randomBytes(16).toString('base64url')}`;

/** The open legacy sessions of the MCP face. */
export class LegacySessions {
  private readonly sessions = new Map<string, LegacySession>();
  /** Sessions being served again after a restart, so that two requests of one client revive it once. */
  private readonly reviving = new Map<string, Promise<LegacySession | Response | undefined>>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly build: LegacySessionsOptions['build'];
  private readonly store: LegacySessionStore;
  private readonly idleMs: number;
  private readonly maxSessions: number;
  private readonly now: () => number;
  private readonly onEnd: (gatewaySessionId: string) => Promise<void> | void;

  constructor(opts: LegacySessionsOptions) {
    this.build = opts.build;
    this.store = opts.store;
    this.idleMs = opts.idleMs;
    this.maxSessions = opts.maxSessions ?? 256;
    this.now = opts.now ?? Date.now;
    this.onEnd = opts.onEnd ?? (() => undefined);
    this.sweeper = setInterval(() => void this.sweep(), Math.min(60_000, this.idleMs)).unref();
  }

  /** Serves one request of the legacy leg. */
  async handle(request: Request, credential: string | null, parsedBody: unknown): Promise<Response> {
    const sid = request.headers.get('mcp-session-id');
    const authInfo = { token: '', clientId: credential ?? 'local', scopes: [] };
    if (sid) {
      let session = this.sessions.get(sid);
      if (session && !(await this.current(sid, session))) session = undefined;
      if (!session) {
        const revived = await this.reviveOnce(sid, credential, request.url);
        if (revived instanceof Response) return revived;
        session = revived;
      }
      // A foreign credential's session is answered like an unknown one: nothing about it is confirmed.
      if (!session || session.conn.credential !== credential) {
        return jsonRpcError(404, -32001, 'Session not found: it expired or was closed; initialize a new one');
      }
      await this.seen(session);
      return session.transport.handleRequest(request, { parsedBody, authInfo });
    }
    if (request.method !== 'POST' || !isInitializeRequest(parsedBody)) {
      return jsonRpcError(400, -32000, 'Bad Request: send Mcp-Session-Id, or initialize a session first');
    }
    const refused = await this.admit(credential);
    if (refused) return refused;
    const conn = new Connection(
      credential,
      newId(`${FACE_SESSION_PREFIXES.handle}legacy_`),
      undefined,
      this.store,
    );
    const transport = await this.open(newId('mcp_'), conn, initOf(parsedBody), true);
    return transport.handleRequest(request, { parsedBody, authInfo });
  }

  /** Tells every open session that its tool list may have changed (an operator's change, a reload). */
  async broadcastToolsChanged(): Promise<void> {
    await Promise.all(
      [...this.sessions.values()].map((s) => s.server.sendToolListChanged().catch(() => undefined)),
    );
  }

  /**
   * Tells the sessions acting in gateway session `id` (a handle, or a session's own) that their tool list
   * changed: a change made on any connection, here or on another gateway replica.
   */
  async toolsChangedIn(id: string): Promise<void> {
    for (const [sid, s] of [...this.sessions]) {
      if ((s.conn.handle ?? s.conn.ownSession) !== id || !(await this.current(sid, s))) continue;
      void s.server.sendToolListChanged().catch(() => undefined);
    }
  }

  /**
   * Whether a session open here is still current, its handle as stored: another gateway replica sharing the
   * database may have served it since (and bound it to a handle) or ended it (then it is closed here too).
   */
  private async current(sid: string, session: LegacySession): Promise<boolean> {
    let row: Awaited<ReturnType<LegacySessionStore['get']>>;
    try {
      row = await this.store.get(session.key);
    } catch {
      return true; // a closed store (shutdown): served as it is
    }
    if (row) {
      session.conn.sync(row.handle ?? undefined);
      return true;
    }
    this.sessions.delete(sid);
    void session.transport.close().catch(() => undefined);
    return false;
  }

  /** Open sessions (for health and tests). */
  get size(): number {
    return this.sessions.size;
  }

  /**
   * A transport and server for session `id` (new, or stored before a restart). The transport registers the
   * session once it has answered initialize.
   */
  private async open(
    id: string,
    conn: Connection,
    init: LegacyInit,
    fresh: boolean,
  ): Promise<WebStandardStreamableHTTPServerTransport> {
    let server: Server | undefined;
    const key = legacySessionKey(id);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      // Every answer as one JSON body (a 2025-era client accepts both): the face sends nothing before a result,
      // and list_changed goes to the session's GET stream, which stays SSE.
      enableJsonResponse: true,
      onsessioninitialized: async (sid) => {
        if (!server) return;
        const now = this.now();
        conn.key = key;
        this.sessions.set(sid, { transport, server, conn, key, lastSeen: now, savedSeen: now });
        if (fresh) {
          await this.store.save(
            key,
            { credential: conn.credential, ownSession: conn.ownSession, handle: conn.handle ?? null, init },
            now,
          );
        }
      },
      onsessionclosed: async (sid) => {
        const session = this.sessions.get(sid);
        if (session && this.sessions.delete(sid)) await this.ended(session.key, session.conn.ownSession);
      },
    });
    server = this.build(conn, () => void server?.sendToolListChanged().catch(() => undefined));
    await server.connect(transport);
    return transport;
  }

  private reviveOnce(sid: string, credential: string | null, url: string) {
    let pending = this.reviving.get(sid);
    if (!pending) {
      pending = this.revive(sid, credential, url).finally(() => this.reviving.delete(sid));
      this.reviving.set(sid, pending);
    }
    return pending;
  }

  /**
   * Serves a stored session again (the gateway restarted while its client held it): undefined when there is
   * none for this credential or it has been idle past its lifetime.
   */
  private async revive(
    sid: string,
    credential: string | null,
    url: string,
  ): Promise<LegacySession | Response | undefined> {
    const key = legacySessionKey(sid);
    const row = await this.store.get(key);
    if (!row || row.credential !== credential) return undefined;
    if (this.now() - row.lastSeen > this.idleMs) {
      await this.ended(key, row.ownSession);
      return undefined;
    }
    const refused = await this.admit(credential);
    if (refused) return refused;
    const conn = new Connection(credential, row.ownSession, row.handle ?? undefined, this.store);
    const transport = await this.open(sid, conn, row.init, false);
    // The SDK's transport and server take a session as initialized only from an initialize request: the
    // client's own, as it sent it, is replayed (its answer goes nowhere; the client had it long ago).
    const initialize = {
      jsonrpc: '2.0' as const,
      id: `toolshift-restore-${randomBytes(4).toString('hex')}`,
      method: 'initialize' as const,
      params: row.init,
    };
    const replay = await transport.handleRequest(
      new Request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(initialize),
      }),
      { parsedBody: initialize, authInfo: { token: '', clientId: credential ?? 'local', scopes: [] } },
    );
    await replay.text();
    const session = this.sessions.get(sid);
    if (session) {
      // Recorded at once: another replica's sweep judges the session by its stored last use.
      session.savedSeen = 0;
      await this.seen(session);
    }
    return session;
  }

  /** Refuses a new session of `credential` when it holds its cap and none of its sessions can be closed. */
  private async admit(credential: string | null): Promise<Response | undefined> {
    // The cap is per credential: one client holding all its sessions must not lock out another (the operator).
    if (this.countOf(credential) < this.maxSessions || (await this.evictOne(credential))) return undefined;
    return new Response(
      JSON.stringify({
        jsonrpc: '2.0',
        error: {
          code: -32000,
          message: `Too many open MCP sessions for this credential (MCP_MAX_SESSIONS=${this.maxSessions}); end one (DELETE /mcp) or retry later`,
        },
        id: null,
      }),
      { status: 503, headers: { 'content-type': 'application/json', 'retry-after': '60' } },
    );
  }

  /** Marks a session used now; the store hears of it at most every SAVE_SEEN_MS. */
  private async seen(session: LegacySession): Promise<void> {
    const now = this.now();
    session.lastSeen = now;
    if (now - session.savedSeen < SAVE_SEEN_MS) return;
    session.savedSeen = now;
    try {
      await this.store.touch([[session.key, now]]);
    } catch {
      // A closed store (shutdown): the session is still served; only its restart record is older.
    }
  }

  /** How many sessions `credential` holds open. */
  private countOf(credential: string | null): number {
    let n = 0;
    for (const s of this.sessions.values()) if (s.conn.credential === credential) n++;
    return n;
  }

  /**
   * Closes `credential`'s least recently used session idle for at least a minute; false when all of its
   * sessions are busy.
   */
  private async evictOne(credential: string | null): Promise<boolean> {
    let oldest: [string, LegacySession] | undefined;
    for (const entry of this.sessions) {
      if (entry[1].conn.credential !== credential) continue;
      if (!oldest || entry[1].lastSeen < oldest[1].lastSeen) oldest = entry;
    }
    if (!oldest || this.now() - oldest[1].lastSeen < 60_000) return false;
    this.sessions.delete(oldest[0]);
    await oldest[1].transport.close().catch(() => undefined);
    await this.ended(oldest[1].key, oldest[1].conn.ownSession);
    return true;
  }

  /** Closes sessions idle longer than the lifetime, and forgets stored ones no client came back for. */
  async sweep(): Promise<void> {
    const cutoff = this.now() - this.idleMs;
    for (const [id, session] of this.sessions) {
      if (session.lastSeen >= cutoff) continue;
      this.sessions.delete(id);
      await session.transport.close().catch(() => undefined);
      // Idle here but used through another replica since: only this replica's copy closes.
      if (!(await this.usedElsewhere(session))) await this.ended(session.key, session.conn.ownSession);
    }
    try {
      // Open sessions are judged by their time in memory; stored ones with SAVE_SEEN_MS to spare, as the
      // replica serving one writes its last use that much later at most.
      const open = new Set([...this.sessions.values()].map((s) => s.key));
      for (const row of await this.store.idle(cutoff - SAVE_SEEN_MS))
        if (!open.has(row.key)) await this.ended(row.key, row.ownSession);
    } catch {
      // A closed store (shutdown): the next start sweeps them.
    }
  }

  /**
   * Whether another replica used the session since this one last recorded a use: the stored last use is then
   * later than what this replica wrote (it writes its own at most every SAVE_SEEN_MS, as the others do).
   */
  private async usedElsewhere(session: LegacySession): Promise<boolean> {
    try {
      return ((await this.store.get(session.key))?.lastSeen ?? 0) > session.savedSeen;
    } catch {
      return false;
    }
  }

  /** Forgets an ended session and tells the gateway; a failure there must not stop the others' ending. */
  private async ended(key: string, ownSession: string): Promise<void> {
    try {
      await this.store.drop(key);
    } catch {
      // A closed store: the row goes at the next sweep after a start.
    }
    try {
      await this.onEnd(ownSession);
    } catch {
      // Its rows stay for retention (SESSION_RETENTION_DAYS) to delete.
    }
  }

  /**
   * Closes every connection (gateway shutdown). The sessions are not ended: they are kept in the store with
   * their last use, and served again when their clients come back after a restart.
   */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.sessions.values()];
    this.sessions.clear();
    try {
      await this.store.touch(all.map((s) => [s.key, s.lastSeen] as const));
    } catch {
      // A closed store: their last use is SAVE_SEEN_MS older at most.
    }
    await Promise.all(all.map((s) => s.transport.close().catch(() => undefined)));
  }
}

/** What an initialize request said, kept to serve the session again after a restart. */
function initOf(body: unknown): LegacyInit {
  const params = (body as { params?: Partial<LegacyInit> }).params ?? {};
  return {
    protocolVersion: String(params.protocolVersion ?? ''),
    capabilities: params.capabilities ?? {},
    clientInfo: params.clientInfo ?? { name: 'unknown', version: '0' },
  };
}

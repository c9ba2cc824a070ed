import { randomBytes } from 'node:crypto';
import {
  isInitializeRequest,
  type Server,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';

// The legacy leg (MCP 2025-11-25 and earlier): one protocol session per client, each its own gateway
// session, with list_changed sent to that session alone when its toolsets change. Sessions are bound to the
// credential that opened them and closed after an idle lifetime.

interface LegacySession {
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  credential: string | null;
  lastSeen: number;
}

const jsonRpcError = (status: number, code: number, message: string) =>
  new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), {
    status,
    headers: { 'content-type': 'application/json' },
  });

/** The open legacy sessions of the MCP face. */
export class LegacySessions {
  private readonly sessions = new Map<string, LegacySession>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    /** Builds the server of a new session (its id is known once initialize is answered); `changed` sends it list_changed. */
    private readonly build: (sessionId: () => string, changed: () => void) => Server,
    private readonly idleMs: number,
    /**
     * The most sessions one credential may hold open; beyond it that credential's least recently used session
     * idle for a minute is closed, else 503.
     */
    private readonly maxSessions = 256,
    private readonly now: () => number = Date.now,
    /**
     * Called with a session's id once it has ended (DELETE /mcp, idle expiry, eviction, shutdown): the gateway
     * session behind it and its active toolsets are deleted with it, instead of staying behind until retention.
     */
    private readonly onEnd: (sessionId: string) => void = () => undefined,
  ) {
    this.sweeper = setInterval(() => void this.sweep(), Math.min(60_000, idleMs)).unref();
  }

  /** Serves one request of the legacy leg. */
  async handle(request: Request, credential: string | null, parsedBody: unknown): Promise<Response> {
    const sid = request.headers.get('mcp-session-id');
    const authInfo = { token: '', clientId: credential ?? 'local', scopes: [] };
    if (sid) {
      const session = this.sessions.get(sid);
      // A foreign credential's session is answered like an unknown one: nothing about it is confirmed.
      if (!session || session.credential !== credential) {
        return jsonRpcError(404, -32001, 'Session not found: it expired or was closed; initialize a new one');
      }
      session.lastSeen = this.now();
      return session.transport.handleRequest(request, { parsedBody, authInfo });
    }
    if (request.method !== 'POST' || !isInitializeRequest(parsedBody)) {
      return jsonRpcError(400, -32000, 'Bad Request: send Mcp-Session-Id, or initialize a session first');
    }
    // The cap is per credential: one client holding all its sessions must not lock out another (the operator).
    if (this.countOf(credential) >= this.maxSessions && !(await this.evictOne(credential))) {
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
    let server: Server | undefined;
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => `mcp_${randomBytes(16).toString('base64url')}`,
      onsessioninitialized: (id) => {
        if (server) this.sessions.set(id, { transport, server, credential, lastSeen: this.now() });
      },
      onsessionclosed: (id) => {
        if (this.sessions.delete(id)) this.ended(id);
      },
    });
    const sessionId = () => transport.sessionId ?? '';
    server = this.build(sessionId, () => void server?.sendToolListChanged().catch(() => undefined));
    await server.connect(transport);
    return transport.handleRequest(request, { parsedBody, authInfo });
  }

  /** Tells every open session that its tool list may have changed (an operator's change, a reload). */
  async broadcastToolsChanged(): Promise<void> {
    await Promise.all(
      [...this.sessions.values()].map((s) => s.server.sendToolListChanged().catch(() => undefined)),
    );
  }

  /** Open sessions (for health and tests). */
  get size(): number {
    return this.sessions.size;
  }

  /** How many sessions `credential` holds open. */
  private countOf(credential: string | null): number {
    let n = 0;
    for (const s of this.sessions.values()) if (s.credential === credential) n++;
    return n;
  }

  /**
   * Closes `credential`'s least recently used session idle for at least a minute; false when all of its
   * sessions are busy.
   */
  private async evictOne(credential: string | null): Promise<boolean> {
    let oldest: [string, LegacySession] | undefined;
    for (const entry of this.sessions) {
      if (entry[1].credential !== credential) continue;
      if (!oldest || entry[1].lastSeen < oldest[1].lastSeen) oldest = entry;
    }
    if (!oldest || this.now() - oldest[1].lastSeen < 60_000) return false;
    this.sessions.delete(oldest[0]);
    await oldest[1].transport.close().catch(() => undefined);
    this.ended(oldest[0]);
    return true;
  }

  /** Closes sessions idle longer than the lifetime. */
  async sweep(): Promise<void> {
    const cutoff = this.now() - this.idleMs;
    for (const [id, session] of this.sessions) {
      if (session.lastSeen < cutoff) {
        this.sessions.delete(id);
        await session.transport.close().catch(() => undefined);
        this.ended(id);
      }
    }
  }

  /** Tells the gateway a session ended; a failure there (a closed store) must not stop the others' ending. */
  private ended(id: string): void {
    try {
      this.onEnd(id);
    } catch {
      // Its rows stay for retention (SESSION_RETENTION_DAYS) to delete.
    }
  }

  /** Closes every session (gateway shutdown). */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.sessions];
    this.sessions.clear();
    await Promise.all(all.map(([, s]) => s.transport.close().catch(() => undefined)));
    // A legacy session does not outlive the process (a client initializes anew): its gateway session goes.
    for (const [id] of all) this.ended(id);
  }
}

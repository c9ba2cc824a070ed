import type { AuthProvider } from '@modelcontextprotocol/client';
import type { McpConnection } from '../backends/mcp-connection.ts';
import type { OAuthSpec } from './mcp-backend-spec.ts';

// People's own connections (catalog-state.ts routeOf): where their values come from, and how many are kept.

export const MAX_PERSONAL = 256;

/** Where a person's values come from (lib/identity, unsealed with the gateway's key). */
export interface PersonalValues {
  valuesFor(forUser: string, toolset: string): Promise<Record<string, string>>;
}

/** People's OAuth grants at OAuth toolsets' servers (backends/oauth-accounts.ts); `forUser` is `user:<id>`. */
export interface PersonalGrants {
  /** The scopes of the person's grant; undefined when they have none. */
  scopesOf(forUser: string, toolset: string): Promise<string[] | undefined>;
  /** Their connection's authProvider: their token, refreshed as it needs. */
  auth(forUser: string, toolset: string): AuthProvider;
  /** Drops (and revokes) their grant; false when there was none. */
  drop(forUser: string, toolset: string, why: string): Promise<boolean>;
}

/** The scopes a person's grant needs for these tools of an OAuth toolset (the server's names): its own, and theirs. */
export function scopesFor(oauth: OAuthSpec, tools: readonly string[]): string[] {
  return [...new Set([...oauth.scopes, ...tools.flatMap((t) => oauth.toolScopes[t] ?? [])])];
}

/** The tools of an OAuth toolset that name their scopes and that it offers (its include list, when it has one). */
export function scopedTools(oauth: OAuthSpec, include: readonly string[] | undefined): string[] {
  return Object.keys(oauth.toolScopes).filter((t) => !include || include.includes(t));
}

/** Closes the least recently used connection with no call in flight. */
export async function evict(pool: Map<string, McpConnection>): Promise<void> {
  for (const [key, conn] of pool) {
    if (conn.inFlight > 0) continue;
    pool.delete(key);
    await conn.close();
    return;
  }
}

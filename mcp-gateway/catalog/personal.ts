import type { McpConnection } from '../backends/mcp-connection.ts';

// People's own connections (catalog-state.ts routeOf): where their values come from, and how many are kept.

export const MAX_PERSONAL = 256;

/** Where a person's values come from (lib/identity, unsealed with the gateway's key). */
export interface PersonalValues {
  valuesFor(forUser: string, toolset: string): Promise<Record<string, string>>;
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

import type { Logger } from '../../lib/telemetry/log.ts';
import type { UpstreamPool } from '../backends/upstream-pool.ts';
import type { PersonalGrants, PersonalValues } from './personal.ts';
import type { PinStore } from './pins.ts';
import type { ToolsetSources, ToolsetSpec } from './toolset-files.ts';

// What the catalog is built from and what it reports of each toolset (catalog.ts builds it).

/** A toolset as declared, with the names of the tools it offers right now. */
export type Toolset = ToolsetSpec & { tools: string[] };

/** What the admin listing shows about a toolset beyond its id and tools. */
export interface ToolsetStatus {
  backend: string | { mcp: Record<string, unknown> };
  health?: 'idle' | 'connecting' | 'up' | 'down' | 'error';
  health_reason?: string;
  withheld: {
    name: string;
    status: 'changed' | 'new';
    hash: string;
    definition: Record<string, unknown>;
    diff?: string;
  }[];
}

/** Options for buildCatalog; everything has a default so tests can pass only what they need. */
export interface CatalogOptions {
  /** How long to wait for native backends to come up at start. */
  waitMs?: number;
  /** Where listings and pins persist (the gateway store); default: in memory. */
  store?: PinStore;
  log?: Logger;
  /**
   * Where reload reads from: the shipped directory and the user's; `vars` is called at each reload, so
   * variables added to .env are seen.
   */
  source?: ToolsetSources & { vars?: () => Record<string, string | undefined> };
  /**
   * Upstream connections: timeouts, the per-message cap, the cap of a result the model is given, calls in
   * flight per server and per session, and the pool that bounds the stdio servers running at once.
   */
  connection?: {
    connectTimeoutMs?: number;
    livenessTimeoutMs?: number;
    maxMessageBytes?: number;
    maxResultBytes?: number;
    maxConcurrentCalls?: number;
    maxCallsPerSession?: number;
    pool?: UpstreamPool;
  };
  /** People's own values of the toolsets' `user_secrets` (lib/identity); without it, everyone uses the shared ones. */
  personal?: PersonalValues;
  /** People's OAuth grants (backends/oauth-accounts.ts); without it, an OAuth toolset serves nobody. */
  grants?: PersonalGrants;
  /** Where a person connects their own account for a toolset (the console's page), for the refusals that ask. */
  connectUrl?: (toolset: string) => string;
}

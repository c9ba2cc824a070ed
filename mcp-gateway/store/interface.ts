import type { Pin, PinnedDefinition } from '../catalog/pins.ts';
import type { AuditEntry, AuditFilter, AuditPage } from './audit.ts';

/**
 * The gateway's persistence: the seam another database plugs into (createGatewayStore is the SQLite one).
 */
export interface GatewayStore {
  /** Creates the session with `defaults` active unless it exists; true when it was created. */
  ensureSession(sessionId: string, defaults: readonly string[]): boolean;
  /** The session's active toolsets in activation order, or null for a session never stored. */
  activeToolsets(sessionId: string): string[] | null;
  /** Activates in the given order; returns the ids that were not active before. */
  activate(sessionId: string, ids: readonly string[]): string[];
  /** Deactivates; returns the ids that were active before. */
  deactivate(sessionId: string, ids: readonly string[]): string[];
  /** Toolsets the operator has disabled. */
  disabledToolsets(): ReadonlySet<string>;
  /** The user's changes to which toolsets a new session starts with. */
  defaultOverrides(): ReadonlyMap<string, boolean>;
  setDefaults(ids: readonly string[], active: boolean): void;
  /** Sets the operator's ceiling; disabling also removes the toolset from every session. */
  setEnabled(toolsetId: string, enabled: boolean): void;
  /** Deletes sessions with their active toolsets. */
  dropSessions(ids: readonly string[]): void;
  /** Removes a toolset that no longer exists from every session. */
  dropToolset(toolsetId: string): void;
  /** The last tool listing seen from an upstream toolset, in the server's order. */
  lastListing(toolsetId: string): PinnedDefinition[];
  saveListing(toolsetId: string, definitions: readonly PinnedDefinition[]): void;
  /** An upstream toolset's approved definitions by tool, or null before it was first seen. */
  pins(toolsetId: string): Map<string, Pin> | null;
  pin(toolsetId: string, pins: readonly Pin[]): void;
  /** Records an audit entry with the current actor (batched). */
  audit(entry: AuditEntry): void;
  /** A page of audit rows, newest first. */
  listAudit(filter: AuditFilter): AuditPage;
  pruneAudit(before: string, limit: number): number;
  pruneAuditOverflow(maxRows: number, limit: number): number;
  pruneIdleSessions(before: string, limit: number): number;
  /** Commits the batched writes now. */
  flush(): void;
  close(): void;
}

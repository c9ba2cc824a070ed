import type { Catalog } from '../catalog/catalog.ts';
import { AUDIT_PAGE_MAX, type AuditSearch } from '../contract.ts';
import type { AuditFilter, AuditRow } from '../store/audit.ts';
import type { GatewayStore } from '../store/interface.ts';

// The audit trail as searched from the console and the API: a page at a time, or every page for an export.

/** Whose work a search may find (`user:<id>`s, AuditFilter's `for_users`); absent: everyone's. */
export type InSight = Pick<AuditFilter, 'for_users'>;

type Search = AuditSearch & InSight & { cursor?: string; limit: number };

/**
 * The store's filter for a search: a toolset stands for its own changes (a subject naming it, alone or in a
 * list) and the calls of its tools; a tool for its calls; the outcome for `ok`.
 */
function auditFilter(catalog: Catalog, search: Search): AuditFilter {
  const { toolset, tool, outcome, ...rest } = search;
  let subjects: string[] | undefined;
  if (toolset) subjects = [toolset, ...(catalog.toolset(toolset)?.tools ?? [])];
  if (tool) subjects = subjects && !subjects.includes(tool) ? [] : [tool];
  return { ...rest, subjects, ok: outcome === undefined ? undefined : outcome === 'ok' };
}

export function auditSearch(catalog: Catalog, store: GatewayStore) {
  return {
    /** Audit rows, newest first, a page at a time. */
    listAudit: (search: Search) => store.listAudit(auditFilter(catalog, search)),
    /** Every audit row the search matches, newest first, a page at a time (for an export). */
    async *exportAudit(search: AuditSearch & InSight): AsyncGenerator<AuditRow[]> {
      const filter = auditFilter(catalog, { ...search, limit: AUDIT_PAGE_MAX });
      for (;;) {
        const page = await store.listAudit(filter);
        if (page.audit.length > 0) yield page.audit;
        if (!page.next_cursor) return;
        filter.cursor = page.next_cursor;
      }
    },
  };
}

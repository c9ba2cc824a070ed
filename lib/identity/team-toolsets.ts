import { HttpError } from '../http/http-error.ts';
import type { Db } from './people.ts';
import { needTeam } from './people.ts';

// A team's ceiling: toolsets its members may not use, and its policy overlay (rules on top of the operator's), inside the operator's (a toolset the operator disabled is
// disabled for everyone; a team can only take more away). Kept as a JSON list on the team's row.

/** The most toolsets one team may disable (a catalog of a few hundred is large). */
const MAX_DISABLED = 512;

const listOf = (text: string | null): string[] => {
  if (!text) return [];
  const parsed: unknown = JSON.parse(text);
  return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
};

/** Disables `ids` for `team` (disabled: true) or lifts that (false); returns the team's list after. */
export async function setTeamToolsets(db: Db, team: string, ids: readonly string[], disabled: boolean) {
  const row = await needTeam(db, team);
  const now = new Set(listOf(row.disabled_toolsets));
  for (const id of ids) {
    if (disabled) now.add(id);
    else now.delete(id);
  }
  const list = [...now].sort();
  if (list.length > MAX_DISABLED) {
    throw new HttpError(
      400,
      `a team disables at most ${MAX_DISABLED} toolsets (this would make ${list.length})`,
    );
  }
  await db
    .updateTable('identity_teams')
    .set({ disabled_toolsets: list.length > 0 ? JSON.stringify(list) : null })
    .where('id', '=', row.id)
    .execute();
  return list;
}

/** The toolsets user `id`'s teams disabled, each with the team that did (the first by name). */
export async function toolsetsDisabledFor(db: Db, id: string): Promise<Map<string, string>> {
  const rows = await db
    .selectFrom('identity_members as m')
    .innerJoin('identity_teams as t', 't.id', 'm.team_id')
    .select(['t.name', 't.disabled_toolsets'])
    .where('m.user_id', '=', id)
    .where('t.disabled_toolsets', 'is not', null)
    .orderBy('t.name')
    .execute();
  const out = new Map<string, string>();
  for (const r of rows) for (const t of listOf(r.disabled_toolsets)) if (!out.has(t)) out.set(t, r.name);
  return out;
}

/** Sets `team`'s policy overlay (YAML text, checked by the caller), or takes it away (null). */
export async function setTeamPolicy(db: Db, team: string, text: string | null): Promise<void> {
  const row = await needTeam(db, team);
  await db.updateTable('identity_teams').set({ policy: text }).where('id', '=', row.id).execute();
}

/** The policy overlays of user `id`'s teams, by team name. */
export async function teamPoliciesFor(db: Db, id: string): Promise<{ team: string; text: string }[]> {
  const rows = await db
    .selectFrom('identity_members as m')
    .innerJoin('identity_teams as t', 't.id', 'm.team_id')
    .select(['t.name', 't.policy'])
    .where('m.user_id', '=', id)
    .where('t.policy', 'is not', null)
    .orderBy('t.name')
    .execute();
  return rows.map((r) => ({ team: r.name, text: r.policy as string }));
}

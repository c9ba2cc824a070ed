import type { Context } from 'hono';

// Whose work a caller sees of the approvals and the audit. A user's key that is not the operator's sees its own
// user's; an approver's also their teammates' (the approvals they decide). The operator's key and the services'
// tokens see everyone's. What is out of sight is as if it did not exist: left out of a listing, and a 404 with the
// words an unknown id gets (no oracle of what another user did).

/** The users (`user:<id>`) whose work the request may see; undefined for everyone's. */
export async function visibleUsers(c: Context): Promise<readonly string[] | undefined> {
  const principal = c.get('principal');
  const holder = principal && 'user' in principal ? principal.user : undefined;
  if (!holder || holder.role === 'operator') return undefined;
  const own = `user:${holder.user.id}`;
  if (holder.role !== 'approver') return [own];
  // Set with the principal by the key's check (lib/http/security.ts).
  const teammates = await c.get('identity').teammates(holder.user.id);
  return [own, ...teammates.map((id) => `user:${id}`)];
}

/** Whether a row of `forUser`'s work is in sight of `visible` (visibleUsers). */
export const inSight = (visible: readonly string[] | undefined, forUser: string | null) =>
  visible === undefined || (forUser !== null && visible.includes(forUser));

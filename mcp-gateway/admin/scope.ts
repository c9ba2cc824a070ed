export { visibleUsers } from '../../lib/http/security.ts';

// Whose work a caller sees of the approvals and the audit. A user's key that is not the operator's sees its own
// user's; an approver's also their teammates' (the approvals they decide). The operator's key and the services'
// tokens see everyone's. What is out of sight is as if it did not exist: left out of a listing, and a 404 with the
// words an unknown id gets (no oracle of what another user did).

/** Whether a row of `forUser`'s work is in sight of `visible` (visibleUsers). */
export const inSight = (visible: readonly string[] | undefined, forUser: string | null) =>
  visible === undefined || (forUser !== null && visible.includes(forUser));

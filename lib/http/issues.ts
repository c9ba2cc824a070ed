import type { z } from 'zod';

// How a failed validation reads to a client or a model: one line naming each bad field. Used by the HTTP layer
// and by the rules that validate without HTTP (the gateway's manage_toolsets, policy and import, the tool kit).

/** Turns zod issues into one line naming each bad field, e.g. `action: Invalid option: expected one of …`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message))
    .join('; ');
}

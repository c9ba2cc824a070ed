import type { IdentityStore } from '../../lib/identity/store.ts';
import { denyAllPolicy, type Policy, PolicyError, parsePolicy } from './policy.ts';

// The teams' policy overlays as the ceiling weighs them (ceiling.ts verdictOf): each team's YAML rules, kept as
// the operator set them (admin/identity.ts checked them), parsed once per text and read at most every two
// seconds per user, so a change reaches every replica within that.

const CACHE_MS = 2000;

/** The parsed policy of an overlay's text; one that no longer parses denies everything, saying why. */
function parsed(cache: Map<string, Policy>, team: string, text: string): Policy {
  let policy = cache.get(text);
  if (!policy) {
    const file = `team ${team}'s policy`;
    try {
      policy = parsePolicy(text, file);
    } catch (err) {
      if (!(err instanceof PolicyError)) throw err;
      policy = denyAllPolicy(file, err.message);
    }
    if (cache.size > 1000) cache.clear();
    cache.set(text, policy);
  }
  return policy;
}

/** The overlays of the teams of user `forUser` (`user:<id>`), for createCeiling's `teamPolicies`. */
export function teamPoliciesOf(identity: IdentityStore) {
  const policies = new Map<string, Policy>();
  const kept = new Map<string, { at: number; value: Promise<{ team: string; policy: Policy }[]> }>();
  return (forUser: string) => {
    const now = Date.now();
    const hit = kept.get(forUser);
    if (hit && now - hit.at < CACHE_MS) return hit.value;
    if (kept.size > 10_000) kept.clear();
    const value = identity
      .teamPoliciesFor(forUser.slice('user:'.length))
      .then((rows) => rows.map((r) => ({ team: r.team, policy: parsed(policies, r.team, r.text) })));
    kept.set(forUser, { at: now, value });
    // A failed read is not kept: the next call asks again.
    value.catch(() => kept.delete(forUser));
    return value;
  };
}

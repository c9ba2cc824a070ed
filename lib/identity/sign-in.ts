import type { SignInRule } from '../config/sign-in.ts';
import { HttpError } from '../http/http-error.ts';
import { type Db, newId } from './people.ts';

// Who a person signing in with an identity provider is here (identity_sign_ins: the provider's issuer and their
// `sub`, and the user they are). The first time: the user the operator made with their verified email, or a user
// made for them when their claims match the operator's rule (OIDC_ALLOW: an email domain, a group); anyone else is
// refused, saying why. A user the operator removed stays out: their sign-in is refused, not a new user made.

/** The claims of an ID token or an access token (only these are read; each is checked for its type). */
export type Claims = Record<string, unknown> & { sub?: unknown };

export interface SignedIn {
  user: { id: string; name: string };
  /** Whether the user was made by this sign-in. */
  made: boolean;
}

const NAME_CHARS = /[^a-z0-9._-]+/g;

// Some providers (Cognito) say "true" as a string.
const verifiedEmail = (c: Claims): string | undefined =>
  typeof c.email === 'string' &&
  (c.email_verified === true || c.email_verified === 'true') &&
  c.email.length <= 320
    ? c.email.toLowerCase()
    : undefined;

function groupsOf(c: Claims, claim: string): string[] {
  const g = c[claim];
  if (typeof g === 'string') return [g];
  return Array.isArray(g) ? g.filter((x): x is string => typeof x === 'string').slice(0, 1000) : [];
}

/** Why the rule lets this person in, or undefined. */
function admitted(c: Claims, rule: SignInRule): string | undefined {
  const email = verifiedEmail(c);
  const domain = email?.slice(email.lastIndexOf('@') + 1);
  if (domain && rule.domains.includes(domain)) return `email domain ${domain}`;
  const group = groupsOf(c, rule.groupsClaim).find((g) => rule.groups.includes(g));
  return group === undefined ? undefined : `group ${group}`;
}

/** A user name from the claims (preferred_username, the email's local part), free in the store. */
async function freeName(db: Db, c: Claims): Promise<string> {
  const wanted = [c.preferred_username, typeof c.email === 'string' ? c.email.split('@')[0] : undefined]
    .filter((v): v is string => typeof v === 'string')
    .map((v) =>
      v
        .toLowerCase()
        .replace(NAME_CHARS, '-')
        .replace(/^[^a-z0-9]+/, '')
        .slice(0, 56),
    )
    .find((v) => v !== '');
  const base = wanted ?? 'user';
  for (let n = 1; n < 1000; n++) {
    const name = n === 1 ? base : `${base}-${n}`;
    const taken = await db
      .selectFrom('identity_users')
      .select('id')
      .where('name', '=', name)
      .executeTakeFirst();
    if (!taken) return name;
  }
  throw new HttpError(409, `no free user name starting with ${base}`);
}

const userById = (db: Db, id: string) =>
  db.selectFrom('identity_users').select(['id', 'name']).where('id', '=', id).executeTakeFirst();

const userByEmail = (db: Db, email: string) =>
  db
    .selectFrom('identity_users')
    .select(['id', 'name'])
    .where((eb) => eb(eb.fn('lower', ['email']), '=', email))
    .executeTakeFirst();

/** Whether a user signs in through some account of a provider already (then an email alone links nobody to them). */
const linked = async (db: Db, userId: string) =>
  (await db
    .selectFrom('identity_sign_ins')
    .select('subject')
    .where('user_id', '=', userId)
    .executeTakeFirst()) !== undefined;

/**
 * The user a person the provider `issuer` vouches for (`claims`) signs in as: found, linked, or made by the rule.
 * Refused (403, saying why and what would let them in) otherwise.
 */
export async function signInUser(
  db: Db,
  issuer: string,
  claims: Claims,
  rule: SignInRule,
): Promise<SignedIn> {
  const subject = typeof claims.sub === 'string' && claims.sub.length <= 255 ? claims.sub : undefined;
  if (subject === undefined)
    throw new HttpError(401, 'the identity provider named no subject (sub) for this person');
  const email = verifiedEmail(claims);
  const link = await db
    .selectFrom('identity_sign_ins')
    .select('user_id')
    .where('issuer', '=', issuer)
    .where('subject', '=', subject)
    .executeTakeFirst();
  if (link) {
    const user = await userById(db, link.user_id);
    if (user) return { user, made: false };
    // Removed by the operator: back only as a user the operator made again with this verified email.
    const again = email ? await userByEmail(db, email) : undefined;
    if (!again) {
      throw new HttpError(
        403,
        'your user was removed by the operator; ask them to add you again (with your email)',
      );
    }
    await db
      .updateTable('identity_sign_ins')
      .set({ user_id: again.id })
      .where('issuer', '=', issuer)
      .where('subject', '=', subject)
      .execute();
    return { user: again, made: false };
  }
  // A user the operator made with this email, who has not signed in yet; one who has, through another account
  // (another provider, another subject at this one), is not taken over by an account that shares the email.
  const known = email ? await userByEmail(db, email) : undefined;
  if (known && (await linked(db, known.id))) {
    // This very account, linked by a first sign-in of its own that ran at the same time: theirs.
    const mine = await linkOf(db, issuer, subject);
    if (mine) return { user: mine, made: false };
    throw new HttpError(
      403,
      `the user with the email ${email} signs in through another account; sign in with that one, or ask the operator`,
    );
  }
  if (known) return { user: await linkTo(db, issuer, subject, known.id), made: false };
  if (email && (await removedEmail(db, email))) {
    throw new HttpError(
      403,
      'your user was removed by the operator; ask them to add you again (with your email)',
    );
  }
  if (admitted(claims, rule) === undefined) throw new HttpError(403, refusal(claims, rule));
  return makeUser(db, issuer, subject, claims, email);
}

/** The user account (issuer, subject) is linked to, if any. */
async function linkOf(db: Db, issuer: string, subject: string) {
  return db
    .selectFrom('identity_sign_ins as s')
    .innerJoin('identity_users as u', 'u.id', 's.user_id')
    .select(['u.id', 'u.name'])
    .where('s.issuer', '=', issuer)
    .where('s.subject', '=', subject)
    .executeTakeFirst();
}

const removedEmail = async (db: Db, email: string) =>
  (await db.selectFrom('identity_removed').select('email').where('email', '=', email).executeTakeFirst()) !==
  undefined;

/** Links the account to `userId`, or finds the user a racing first sign-in of the same account linked it to. */
async function linkTo(db: Db, issuer: string, subject: string, userId: string) {
  await db
    .insertInto('identity_sign_ins')
    .values({ issuer, subject, user_id: userId, created_at: new Date().toISOString() })
    .onConflict((oc) => oc.columns(['issuer', 'subject']).doNothing())
    .execute();
  const link = await linkOf(db, issuer, subject);
  if (!link) throw new Error(`the sign-in of ${subject} at ${issuer} was linked to a user who is gone`);
  return link;
}

/**
 * A user made for a first sign-in, and its link, in one transaction. Racing first sign-ins: of the same account,
 * the other's user wins; of two people whose names come out the same, the later takes the next free name.
 */
async function makeUser(db: Db, issuer: string, subject: string, claims: Claims, email: string | undefined) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await db.transaction().execute(async (trx) => {
        const user = { id: newId('usr'), name: await freeName(trx, claims) };
        await trx
          .insertInto('identity_users')
          .values({ ...user, email: email ?? null, limits: null, created_at: new Date().toISOString() })
          .execute();
        await trx
          .insertInto('identity_sign_ins')
          .values({ issuer, subject, user_id: user.id, created_at: new Date().toISOString() })
          .execute();
        return { user, made: true };
      });
    } catch (err) {
      const link = await db
        .selectFrom('identity_sign_ins')
        .select('user_id')
        .where('issuer', '=', issuer)
        .where('subject', '=', subject)
        .executeTakeFirst();
      const user = link && (await userById(db, link.user_id));
      if (user) return { user, made: false };
      if (attempt >= 3) throw err;
    }
  }
}

function refusal(c: Claims, rule: SignInRule): string {
  const who = typeof c.email === 'string' ? c.email.slice(0, 320) : 'this person';
  if (rule.domains.length === 0 && rule.groups.length === 0) {
    return `${who} is not a user here: the operator adds users (toolshift users add NAME --email EMAIL); nobody is made a user on first sign-in`;
  }
  const allowed = [
    ...rule.domains.map((d) => `a verified email at ${d}`),
    ...rule.groups.map((g) => `group ${g}`),
  ];
  return `${who} is not a user here, and is not let in on first sign-in: that needs ${allowed.join(' or ')}`;
}

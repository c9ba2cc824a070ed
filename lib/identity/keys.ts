import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Role } from '../http/contract.ts';

// A user's API key: `tsk_<id>_<secret>`. The id (10 letters and digits) is public: it names the key in listings
// and the audit, and finds its row; the secret is shown once, when the key is made, and only its SHA-256 is kept
// (a key is 256 bits of randomness: a plain hash is enough, there is nothing to guess).

/** What a key lets its user do, from least to most. */
export const KEY_ROLES = ['viewer', 'runner', 'approver', 'operator'] as const;
export type KeyRole = (typeof KEY_ROLES)[number];

const KEY_SHAPE = /^tsk_([a-z0-9]{10})_([A-Za-z0-9_-]{43})$/;
const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A new key: its public id, the whole key (shown once) and the hash kept of it. */
export function mintKey(): { id: string; key: string; hash: string } {
  const bytes = randomBytes(10);
  const id = [...bytes].map((b) => ID_ALPHABET[b % ID_ALPHABET.length]).join('');
  const key = `tsk_${id}_${randomBytes(32).toString('base64url')}`;
  return { id, key, hash: hashKey(key) };
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The id of a presented value shaped as a key, or undefined (a service token, or nothing like a key). */
export function keyIdOf(presented: string): string | undefined {
  return KEY_SHAPE.exec(presented)?.[1];
}

/** Whether `presented` is the key whose kept hash is `hash` (in constant time). */
export function keyMatches(presented: string, hash: string): boolean {
  const want = Buffer.from(hash, 'hex');
  const got = createHash('sha256').update(presented).digest();
  return want.length === got.length && timingSafeEqual(want, got);
}

/** Which service a key is presented to. */
export type KeyService = 'agent-server' | 'mcp-gateway';

/**
 * The routes' roles a key of `role` stands for on `service`, first the one its messages name. The agent-server:
 * a viewer reads, the others run tasks (an operator sees everyone's). The gateway: a runner uses the MCP face and
 * reads toolsets, an approver also decides approvals, an operator is the operator.
 */
export function serviceRoles(service: KeyService, role: KeyRole): Role[] {
  if (service === 'agent-server') return role === 'viewer' ? ['viewer'] : ['user'];
  switch (role) {
    case 'viewer':
      return ['viewer'];
    case 'runner':
      return ['mcp', 'viewer'];
    case 'approver':
      return ['approver', 'mcp', 'viewer'];
    case 'operator':
      return ['admin', 'approver', 'mcp', 'viewer'];
  }
}

/** Parses `30d`, `12h`, `90m` (or a whole number of days) into milliseconds; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const m = /^([1-9]\d{0,4})([dhm]?)$/.exec(text.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = { d: 86_400_000, h: 3_600_000, m: 60_000, '': 86_400_000 }[m[2] as 'd' | 'h' | 'm' | ''];
  return n > 0 ? n * unit : undefined;
}

import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

// People's own upstream credentials (an API key they set, the OAuth tokens of an account they connected) are kept
// sealed: AES-256-GCM under a key derived from GATEWAY_SEAL_KEY, bound to whose and what they are (the additional
// data: `user`, `toolset`, `name`), so the database alone gives none away and a row copied onto another user's
// opens for nobody.

export interface Sealer {
  seal(plain: string, bound: string): string;
  /** The value, or undefined when it was sealed under another key or for another binding. */
  open(sealed: string, bound: string): string | undefined;
}

export function sealer(secret: string): Sealer {
  const key = Buffer.from(hkdfSync('sha256', secret, 'toolshift-upstream-credentials', 'seal', 32));
  return {
    seal(plain, bound) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(bound));
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
    },
    open(sealed, bound) {
      const raw = Buffer.from(sealed, 'base64url');
      if (raw.length < 28) return undefined;
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
        decipher.setAAD(Buffer.from(bound));
        decipher.setAuthTag(raw.subarray(raw.length - 16));
        return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString(
          'utf8',
        );
      } catch {
        return undefined;
      }
    },
  };
}

/** What a sealed value is bound to: whose, for which toolset, which value. */
export const boundTo = (user: string, toolset: string, name: string) =>
  `${user}\u0000${toolset}\u0000${name}`;

// What a toolset file's `${VAR}` values become wherever they would leave the gateway: their references again.
// It lives with the backends because an upstream connection carries one, to redact what its server says; the
// catalog (catalog/env-expand.ts) fills the values in and makes the redactor of each server.

/** Variables whose values are paths the operator already knows, so they are not treated as secrets. */
export const PUBLIC_VARIABLES: ReadonlySet<string> = new Set(['TOOLSHIFT_DATA_DIR', 'TOOLSETS_DIR']);

/** Values shorter than this are not redacted: replacing "1" or "on" everywhere would garble results. */
const MIN_SECRET_LENGTH = 4;

/** Replaces secret values with their `${NAME}` references wherever they would leave the gateway. */
export class Redactor {
  private readonly pairs: [string, string][];

  constructor(secrets: Record<string, string>) {
    const pairs: [string, string][] = [];
    for (const [name, value] of Object.entries(secrets)) {
      if (PUBLIC_VARIABLES.has(name) || value.length < MIN_SECRET_LENGTH) continue;
      pairs.push([value, `\${${name}}`]);
      const encoded = encodeURIComponent(value);
      if (encoded !== value) pairs.push([encoded, `\${${name}}`]);
    }
    // Longest first, so a secret that contains another is replaced whole.
    this.pairs = pairs.sort((a, b) => b[0].length - a[0].length);
  }

  /** True when there is nothing to hide. */
  get empty(): boolean {
    return this.pairs.length === 0;
  }

  text(value: string): string {
    let out = value;
    for (const [secret, reference] of this.pairs) out = out.split(secret).join(reference);
    return out;
  }

  /** Redacts every string inside a JSON-like value (object keys included). */
  deep<T>(value: T): T {
    if (this.empty) return value;
    const walk = (v: unknown): unknown => {
      if (typeof v === 'string') return this.text(v);
      if (Array.isArray(v)) return v.map(walk);
      if (v && typeof v === 'object') {
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [this.text(k), walk(x)]));
      }
      return v;
    };
    return walk(value) as T;
  }
}

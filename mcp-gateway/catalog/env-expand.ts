import { EnvSchema } from '../../lib/config/config.ts';
import { PUBLIC_VARIABLES } from '../backends/redactor.ts';

// `${VAR}` references in toolset files: filled from the environment when a file is loaded, and the
// values kept out of everything the gateway shows or stores (admin API, SQLite, logs, tool results).
// A file may only use variables it declares, and never toolshift's own settings unless the operator
// allows them by name for that file: the gateway's environment holds its model key and its tokens.

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** Every variable toolshift reads as a setting (lib/config/config.ts), and the families its settings come in. */
const SETTINGS: ReadonlySet<string> = new Set(Object.keys(EnvSchema.shape));
// Also what its libraries read from the environment: libpq's PG* (the pg driver takes PGPASSWORD, PGUSER,
// PGHOST … when DATABASE_URL leaves them out) and Node's own NODE_* (NODE_OPTIONS, NODE_EXTRA_CA_CERTS …).
const SETTING_FAMILY = /^(OPENAI_|TOOLSHIFT_|PG[A-Z]|NODE_)/;

/**
 * True for one of toolshift's own settings (its model key, database URL, tokens, any OPENAI_*,
 * TOOLSHIFT_*, PG* or NODE_*): a toolset file gets its value only when allow_toolshift_settings names it. The public paths
 * (PUBLIC_VARIABLES) are not: the gateway fills them with its resolved directories.
 */
export function isToolshiftSetting(name: string): boolean {
  if (PUBLIC_VARIABLES.has(name)) return false;
  return SETTINGS.has(name) || SETTING_FAMILY.test(name);
}

/** The names referenced in `text`, in order of first use. */
export function referencedVariables(text: string): string[] {
  return [...new Set([...text.matchAll(REFERENCE)].map((m) => m[1]))];
}

/**
 * Replaces every `${NAME}` in `text` with its value from `env`; `missing` is called once for each name
 * that has no value (it throws, so the caller names the file and the place).
 */
export function expandVariables(
  text: string,
  env: Record<string, string | undefined>,
  missing: (name: string) => never,
): string {
  return text.replace(REFERENCE, (_, name: string) => {
    const value = env[name];
    if (value === undefined) missing(name);
    return value;
  });
}

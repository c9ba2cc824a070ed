import { Redactor } from '../backends/redactor.ts';
import { isToolshiftSetting, referencedVariables } from '../catalog/env-expand.ts';

// Which values of an imported MCP server configuration are secrets, and the `${VAR}` references that
// replace them: an environment variable keeps its own name (unless it is one of toolshift's settings), a
// header credential or a secret-looking argument or query parameter gets `<TOOLSET_ID>_<WHAT>`.

const SECRET_NAME =
  /token|secret|passw|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth|cookie|session|pat\b/i;
const SECRET_SHAPE = /^(sk-|ghp_|gho_|ghs_|github_pat_|xox[abprs]-|glpat-|AKIA|AIza|ya29\.|eyJ)/;

/** True for values that look like credentials: known token prefixes, or long random-looking strings. */
export function looksSecret(value: string): boolean {
  if (SECRET_SHAPE.test(value)) return true;
  if (value.length < 24 || /[\s/:]/.test(value) || value.startsWith('.')) return false;
  return /[a-z]/.test(value) && /[A-Z0-9]/.test(value) && /^[A-Za-z0-9_\-.=+]+$/.test(value);
}

const upper = (s: string) =>
  s
    .toUpperCase()
    .replace(/[^A-Z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');

/** Whether the importing process's environment holds `name` with a value other than `value`. */
function inEnvironment(name: string, value: string): boolean {
  const held = process.env[name];
  return held !== undefined && held !== value;
}

/** A server's block with secrets replaced, the variables it now needs, and a redactor for messages. */
export interface SecretReferences {
  block: Record<string, unknown>;
  variables: string[];
  redact(text: string): string;
}

/**
 * Replaces the secret values of one server. `claimed` maps variable names to values across the whole
 * import, so two servers with different values for the same name get different variables.
 */
export function secretReferences(
  id: string,
  server: {
    command?: string;
    args?: string[];
    env?: Record<string, string>;
    cwd?: string;
    url?: string;
    headers?: Record<string, string>;
  },
  claimed: Map<string, string>,
): SecretReferences {
  const found: Record<string, string> = {};
  const reference = (wanted: string, value: string, own = false) => {
    const prefix = `${upper(id) || 'SERVER'}_`;
    let name = upper(wanted);
    // A name the import makes up always carries the server's id (the file chooses the id and the key, so
    // it could otherwise choose PGPASSWORD or AWS_SECRET_ACCESS_KEY, which the gateway would fill with its
    // own); a stdio server's env key keeps its name, as the server reads it.
    if (!own && !name.startsWith(prefix)) name = `${prefix}${name || 'SECRET'}`;
    if (!name || name === prefix) name = `${prefix}SECRET`;
    // A server's own value never takes the name of one of toolshift's settings (its OPENAI_API_KEY is not
    // toolshift's): the gateway would not give a toolset that variable.
    if (isToolshiftSetting(name)) name = `${prefix}${name}`;
    if (isToolshiftSetting(name)) name = `IMPORTED_${name}`;
    // Nor the name of a variable this environment already holds with another value: it would be filled
    // with that one, sent to a server the file chose.
    for (let n = 2; !own && inEnvironment(name, value); n++) name = `${prefix}${upper(wanted)}_${n}`;
    if (claimed.has(name) && claimed.get(name) !== value) name = `${upper(id)}_${name}`;
    for (let n = 2; claimed.has(name) && claimed.get(name) !== value; n++)
      name = `${upper(id)}_${upper(wanted)}_${n}`;
    claimed.set(name, value);
    found[name] = value;
    return `\${${name}}`;
  };
  const keep = (value: string) => /\$\{[A-Za-z_][A-Za-z0-9_]*\}/.test(value);
  const block: Record<string, unknown> = {};
  if (server.command !== undefined) {
    block.command = server.command;
    const args = server.args ?? [];
    const mapped = args.map((arg, i) => {
      if (keep(arg)) return arg;
      const flag = /^(--?[A-Za-z0-9_-]+)=(.+)$/.exec(arg);
      if (flag && (SECRET_NAME.test(flag[1]) || looksSecret(flag[2]))) {
        return `${flag[1]}=${reference(`${id}_${flag[1].replace(/^-+/, '')}`, flag[2])}`;
      }
      const previous = args[i - 1] ?? '';
      if ((previous.startsWith('-') && SECRET_NAME.test(previous)) || looksSecret(arg)) {
        return reference(`${id}_${previous.replace(/^-+/, '') || 'arg'}`, arg);
      }
      return arg;
    });
    if (mapped.length > 0) block.args = mapped;
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(server.env ?? {})) {
      env[key] =
        keep(value) || !(SECRET_NAME.test(key) || looksSecret(value)) ? value : reference(key, value, true);
    }
    if (Object.keys(env).length > 0) block.env = env;
    if (server.cwd) block.cwd = server.cwd;
  } else {
    const url = new URL(server.url as string);
    for (const [key, value] of [...url.searchParams]) {
      if (!keep(value) && (SECRET_NAME.test(key) || looksSecret(value))) {
        url.searchParams.set(key, reference(`${id}_${key}`, value));
      }
    }
    // The references written as ${NAME}, not %24%7BNAME%7D: decodeURI leaves a reserved character's escape.
    block.url = decodeURI(url.toString()).replace(/%24\{/g, '${');
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(server.headers ?? {})) {
      const scheme = /^(Bearer|Basic|Token)\s+(.+)$/i.exec(value);
      if (keep(value)) headers[key] = value;
      else if (scheme) headers[key] = `${scheme[1]} ${reference(`${id}_token`, scheme[2])}`;
      else if (SECRET_NAME.test(key) || looksSecret(value)) headers[key] = reference(`${id}_${key}`, value);
      else headers[key] = value;
    }
    if (Object.keys(headers).length > 0) block.headers = headers;
  }
  const redactor = new Redactor(found);
  return { block, variables: Object.keys(found), redact: (text) => redactor.text(text) };
}

/**
 * The `${VAR}` references an imported file already has, which the import did not create: the gateway would
 * fill them from its own environment, where toolshift keeps its model key and tokens, so each one must be
 * allowed by name (`--allow-var NAME`). Throws, naming every server and variable, when one is not; nothing
 * is written then. Returns, per server, the allowed ones split into plain variables and toolshift's settings.
 */
export function allowedReferences(
  file: string,
  servers: Record<string, unknown>,
  allow: readonly string[],
): Map<string, { variables: string[]; settings: string[] }> {
  const referenced = new Map(
    Object.entries(servers).map(([name, server]) => [name, referencedVariables(JSON.stringify(server))]),
  );
  const everywhere = new Set([...referenced.values()].flat());
  const unused = allow.filter((name) => !everywhere.has(name));
  if (unused.length > 0) {
    throw new Error(
      `--allow-var ${unused.join(', ')}: no server in ${file} references ${unused.map((n) => `\${${n}}`).join(', ')}` +
        `; it references: ${[...everywhere].join(', ') || 'no variables'}`,
    );
  }
  const allowed = new Set(allow);
  const refused = [...referenced]
    .map(([name, names]) => [name, names.filter((n) => !allowed.has(n))] as const)
    .filter(([, names]) => names.length > 0);
  if (refused.length > 0) {
    const what = (n: string) =>
      isToolshiftSetting(n) ? `${n} (one of toolshift's own settings: its value would go to the server)` : n;
    const lines = refused.map(([name, names]) => `  server "${name}": ${names.map(what).join(', ')}`);
    const flags = [...new Set(refused.flatMap(([, names]) => names))].map((n) => `--allow-var ${n}`);
    throw new Error(
      `${file} references variables the import did not create, which the gateway would fill from its own ` +
        `environment:\n${lines.join('\n')}\nNothing was written. Only if each server should get that value, ` +
        `name every variable: ${flags.join(' ')}`,
    );
  }
  return new Map(
    [...referenced].map(([name, names]) => [
      name,
      {
        variables: names.filter((n) => !isToolshiftSetting(n)),
        settings: names.filter((n) => isToolshiftSetting(n)),
      },
    ]),
  );
}

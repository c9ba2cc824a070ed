import type { Config } from '../lib/config/config.ts';
import { CREDENTIALS, type CredentialVariable, variableOfRole } from '../lib/config/credentials.ts';
import { errorOf } from '../lib/http/http-client.ts';
import { type CliIo, EXIT, serviceEndpoint, UsageError } from './io.ts';
import { checkCredentialTarget, type Targets } from './targets.ts';

// The commands that hand out a credential: `token` prints one, `console` turns one into a login link.

/**
 * `toolshift console [role]`: a one-time login link to the console for the role's token (the operator's by
 * default), minted by the agent-server, which checks the token as a login would.
 */
export async function consoleCommand(
  rest: string[],
  config: Config,
  targets: Targets,
  io: CliIo,
): Promise<number> {
  const role = rest[0] ?? 'admin';
  if (!['admin', 'api', 'viewer'].includes(role) || rest.length > 1)
    throw new UsageError(`unknown role "${rest.join(' ')}"; roles: admin, api, viewer`, 'console');
  const variable = variableOfRole(role) as CredentialVariable;
  const credential = targets.credential(variable);
  const base = targets.agent.url.replace(/\/$/, '');
  if (config.auth.mode === 'none' && !credential) {
    io.stdout(`${base}/console/ (TOOLSHIFT_AUTH=none: no login)\n`);
    return EXIT.ok;
  }
  if (!credential) return tokenCommand([role], config, io);
  // The token travels in the body, to the agent-server: only to where its daemon recorded one listening.
  checkCredentialTarget(targets.agent, credential, 'console');
  const agent = serviceEndpoint('agent-server', targets.agent.url, undefined, io);
  const res = await (agent.fetch ?? fetch)(`${base}/console/links`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: credential.value }),
  });
  if (!res.ok) throw await errorOf(res);
  const link = (await res.json()) as { url: string; role: string; expires_at: string };
  io.stdout(`${link.url}\n`);
  io.stderr(`Logs a browser in once as ${link.role}, until ${link.expires_at}.\n`);
  return EXIT.ok;
}

/** `toolshift token [role]`: prints a credential for scripts and curl (api by default). */
export function tokenCommand(rest: string[], config: Config, io: CliIo): number {
  const role = rest[0] ?? 'api';
  const variable = variableOfRole(role);
  const roles = Object.values(CREDENTIALS).map((c) => c.role);
  if (!variable || rest.length > 1) {
    throw new UsageError(`unknown role "${rest.join(' ')}"; roles: ${roles.join(', ')}`, 'token');
  }
  const value = CREDENTIALS[variable].get(config);
  if (!value) {
    io.stderr(
      config.auth.mode === 'none'
        ? `error: TOOLSHIFT_AUTH=none and ${variable} is not set: the services take no token\n`
        : `error: no ${variable}: ${config.auth.credentialsFile} does not exist yet (npm start makes it) and the ` +
            'environment does not set it\n',
    );
    return EXIT.failed;
  }
  io.stdout(`${value}\n`);
  return EXIT.ok;
}

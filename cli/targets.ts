import os from 'node:os';
import { type Addresses, addressesFile, originOf } from '../lib/config/addresses.ts';
import type { Config } from '../lib/config/config.ts';
import { CREDENTIALS, type CredentialVariable } from '../lib/config/credentials.ts';
import { type ServiceName, UnreachableError } from './io.ts';

// Where the CLI sends what. The services' addresses come from the environment the user set (AGENT_URL,
// GATEWAY_URL), else from those the daemon recorded beside its tokens (lib/config/addresses.ts), else from HOST and
// the ports. A token from the environment goes wherever the user pointed the CLI; a token from the
// credentials file goes only to an origin the daemon that made it recorded for the service it is sent to.

/** Where one service is, and which setting said so (for the refusal). */
export interface Target {
  service: ServiceName;
  url: string;
  /** The setting the URL came from, as a person would name it: "AGENT_URL in the environment". */
  from: string;
  /** The origins the daemon recorded for this service, newest first. */
  recorded: string[];
  /** The file they were recorded in. */
  file: string;
}

/** Where the two services are, and the token the CLI holds for each variable. */
export interface Targets {
  agent: Target;
  gateway: Target;
  credential: (variable: CredentialVariable) => Credential | undefined;
}

/** A token the CLI holds, and whether it came from the credentials file (stored) or the environment. */
export interface Credential {
  variable: CredentialVariable;
  value: string;
  stored: boolean;
}

const URL_VARIABLE: Record<ServiceName, 'AGENT_URL' | 'GATEWAY_URL'> = {
  'agent-server': 'AGENT_URL',
  'mcp-gateway': 'GATEWAY_URL',
};
const PORT_VARIABLE: Record<ServiceName, 'AGENT_PORT' | 'GATEWAY_PORT'> = {
  'agent-server': 'AGENT_PORT',
  'mcp-gateway': 'GATEWAY_PORT',
};

/** A path as typed from the home directory (`~/…`) when it is under it. */
function tilde(file: string): string {
  const home = os.homedir();
  return file.startsWith(`${home}/`) ? `~${file.slice(home.length)}` : file;
}

/**
 * Where `service` is: the URL variable if the environment sets it, else the newest address the daemon
 * recorded, else HOST and the port (nothing recorded: a daemon that never started on this data directory).
 */
export function targetOf(
  service: ServiceName,
  env: Record<string, string | undefined>,
  config: Config,
  addresses: Addresses,
): Target {
  const recorded = addresses[service] ?? [];
  const file = addressesFile(config.auth.credentialsFile);
  const variable = URL_VARIABLE[service];
  const computed = service === 'agent-server' ? config.agent.url : config.gateway.url;
  if (env[variable]?.trim())
    return { service, url: computed, from: `${variable} in the environment`, recorded, file };
  if (recorded[0])
    return { service, url: recorded[0], from: `the address recorded in ${tilde(file)}`, recorded, file };
  const set = ['HOST', PORT_VARIABLE[service]].filter((v) => env[v]?.trim());
  const from = set.length > 0 ? `${set.join(' and ')} in the environment` : 'the default address';
  return { service, url: computed, from, recorded, file };
}

/** The token for `variable`: the environment's (given on purpose), else the stored one, else none. */
export function credentialOf(
  variable: CredentialVariable,
  fromEnv: Config,
  stored: Partial<Record<CredentialVariable, string>>,
): Credential | undefined {
  const given = CREDENTIALS[variable].get(fromEnv);
  if (given) return { variable, value: given, stored: false };
  const value = stored[variable];
  return value ? { variable, value, stored: true } : undefined;
}

/** A stored token the CLI will not send to where a setting pointed it; exit 3, before any request. */
export class TokenWithheldError extends UnreachableError {}

/**
 * Throws TokenWithheldError when `credential` is a stored token and `target` is not an origin its daemon
 * recorded for the service: what pointed elsewhere, where the daemon is, how to give a token on purpose.
 */
export function checkCredentialTarget(
  target: Target,
  credential: Credential | undefined,
  command: string,
): void {
  if (!credential?.stored) return;
  const origin = originOf(target.url);
  if (origin && target.recorded.includes(origin)) return;
  const daemon =
    target.recorded.length > 0
      ? `the daemon that made it recorded its ${target.service} at ${target.recorded.join(', ')}`
      : `the daemon that made it has recorded no ${target.service} address in ${tilde(target.file)} ` +
        '(each service records where it listens when it starts: restart it, e.g. npm start)';
  const variable = URL_VARIABLE[target.service];
  const other =
    target.from === `${variable} in the environment` && target.recorded.length > 0
      ? ` Unset ${variable} to use it; to`
      : ' To';
  throw new TokenWithheldError(
    `not sending the stored ${credential.variable} to ${target.url}: ${target.from} points there, and ${daemon}.` +
      `${other} talk to ${target.url} on purpose, give its token in the environment: ` +
      `${credential.variable}=<token> toolshift ${command}`,
  );
}

import type { Config } from './config.ts';
import { CREDENTIALS, type CredentialVariable } from './credentials.ts';
import type { Logger } from './log.ts';
import { type ServiceTracing, startTracing } from './tracing.ts';

/** Every secret this process holds, so no span carries one: the services' tokens, API keys, the database URL. */
export function knownSecrets(config: Config): (string | undefined)[] {
  const tokens = (Object.keys(CREDENTIALS) as CredentialVariable[]).map((v) => CREDENTIALS[v].get(config));
  const url = config.databaseUrl ? URL.parse(config.databaseUrl) : null;
  return [
    ...tokens,
    config.agent.model.apiKey,
    config.tools.web.braveApiKey,
    config.tools.github.token,
    config.databaseUrl,
    url?.password ? decodeURIComponent(url.password) : undefined,
  ];
}

/** Starts `service`'s tracing from the configuration (nothing is loaded when traces are off). */
export function startServiceTracing(
  service: string,
  config: Config,
  log: Logger,
): Promise<ServiceTracing | undefined> {
  return startTracing(service, config.tracing, { log, secrets: knownSecrets(config), version: '0.1.0' });
}

import type { Config } from '../config/config.ts';
import { CREDENTIALS, type CredentialVariable } from '../config/credentials.ts';
import type { Logger } from './log.ts';
import { type ServiceTracing, startTracing } from './tracing.ts';

/** Environment variables whose names say they hold a secret (a toolset's `${GITHUB_TOKEN}` among them). */
const SECRET_NAME = /TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE|CREDENTIAL|AUTH/i;

/**
 * Every secret this process holds, so no span carries one: the services' tokens, API keys, the database URL
 * and the credentials in it or in the model's URL, and every variable of the environment named like a secret
 * (those an upstream server's toolset file passes on, `${…}`).
 */
export function knownSecrets(
  config: Config,
  env: Record<string, string | undefined> = process.env,
): (string | undefined)[] {
  const tokens = (Object.keys(CREDENTIALS) as CredentialVariable[]).map((v) => CREDENTIALS[v].get(config));
  const url = config.databaseUrl ? URL.parse(config.databaseUrl) : null;
  const model = config.agent.model.baseURL ? URL.parse(config.agent.model.baseURL) : null;
  const named = Object.entries(env)
    .filter(([name]) => SECRET_NAME.test(name))
    .map(([, value]) => value);
  return [
    ...tokens,
    ...named,
    model?.password ? decodeURIComponent(model.password) : undefined,
    model?.username && model.password ? decodeURIComponent(model.username) : undefined,
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

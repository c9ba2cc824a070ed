import { HttpError } from '../../lib/http/http.ts';
import { type AllowList, parseAllowList } from '../../lib/net/allow-list.ts';
import { NetRefusal, type Resolver, resolveChecked, systemResolver } from '../../lib/net/resolve.ts';

// Where a webhook may be POSTed: the web tools' address guard (lib/net), opened to a private host only by
// AGENT_WEBHOOK_ALLOW_HOSTS. Checked when a task names the URL (a 400 that says why) and again by the connector
// of every POST (a name that resolved to a public address then may not lead to a private one later).

/** The setting the operator allows private hosts with. */
export const WEBHOOK_ALLOW_SETTING = 'AGENT_WEBHOOK_ALLOW_HOSTS';

/** What every refusal ends with: the one way to open a door on purpose. */
const HINT = `webhooks are only POSTed to public unicast addresses (an operator can allow a host with ${WEBHOOK_ALLOW_SETTING})`;

/** How webhook URLs are checked: the allow-list, how names resolve, and the refusal's hint. */
export interface WebhookGuard {
  allow: AllowList;
  resolve: Resolver;
  hint: string;
}

/** The guard from AGENT_WEBHOOK_ALLOW_HOSTS (a bad entry throws, naming it); tests give their own resolver. */
export function webhookGuard(
  allowHosts: readonly string[],
  resolve: Resolver = systemResolver,
): WebhookGuard {
  return { allow: parseAllowList(allowHosts, WEBHOOK_ALLOW_SETTING), resolve, hint: HINT };
}

/**
 * Throws 400 unless `url` may be a webhook of this agent-server (a task's or a thread's, when submitted): a
 * refusal that says why rather than a POST that could never be sent.
 */
export async function checkWebhook(guard: WebhookGuard | undefined, url: string): Promise<void> {
  if (!guard) {
    throw new HttpError(
      400,
      'webhook: this agent-server sends no webhooks: it has no signing secret (set AGENT_WEBHOOK_SECRET; ' +
        'TOOLSHIFT_AUTH=none keeps no generated one)',
    );
  }
  const why = await webhookRefusal(url, guard);
  if (why) throw new HttpError(400, `webhook.url: ${why}`);
}

/** Why `raw` may not be a webhook (its host refused, or it does not resolve), or undefined when it may. */
async function webhookRefusal(raw: string, guard: WebhookGuard): Promise<string | undefined> {
  const url = new URL(raw);
  if (url.username !== '' || url.password !== '')
    return 'a webhook URL must not hold a user name or password (they would be sent in clear to every log on the way)';
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  try {
    await resolveChecked(url.hostname, port, guard);
    return undefined;
  } catch (err) {
    if (err instanceof NetRefusal) return err.message;
    throw err;
  }
}

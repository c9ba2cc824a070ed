import { describe, expect, it } from 'vitest';
import { checkWebhook, webhookGuard } from '../../../agent-server/webhooks/guard.ts';

// Where a webhook may go, as a submission is checked (no DNS: the resolver answers as the test says).

const resolve = async (host: string) => [
  { address: host === 'public.test' ? '93.184.216.34' : '10.9.9.9', family: 4 },
];

describe('checkWebhook', () => {
  it('takes a public host, and a private one only when AGENT_WEBHOOK_ALLOW_HOSTS names it', async () => {
    await expect(
      checkWebhook(webhookGuard([], resolve), 'https://public.test/hook'),
    ).resolves.toBeUndefined();
    await expect(checkWebhook(webhookGuard([], resolve), 'http://127.0.0.1:9000/')).rejects.toThrow(
      /webhook\.url: Refused to connect to 127\.0\.0\.1: a loopback address; .*AGENT_WEBHOOK_ALLOW_HOSTS/,
    );
    const allowed = webhookGuard(['127.0.0.1:9000', 'intranet.test'], resolve);
    await expect(checkWebhook(allowed, 'http://127.0.0.1:9000/')).resolves.toBeUndefined();
    await expect(checkWebhook(allowed, 'http://intranet.test/')).resolves.toBeUndefined();
    // Allowed by port: another port of the same host is not.
    await expect(checkWebhook(allowed, 'http://127.0.0.1:9001/')).rejects.toThrow(/loopback/);
  });

  it('refuses credentials in the URL, and a bad allow-list entry names its setting', async () => {
    await expect(checkWebhook(webhookGuard([], resolve), 'https://u:p@public.test/')).rejects.toThrow(
      /must not hold a user name or password/,
    );
    expect(() => webhookGuard(['http://x/'])).toThrow(
      /AGENT_WEBHOOK_ALLOW_HOSTS: "http:\/\/x\/" is not a host/,
    );
  });
});

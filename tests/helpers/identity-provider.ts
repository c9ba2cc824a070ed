import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type ClientMetadata, type Configuration } from 'oidc-provider';

// A real OpenID provider inside the test (oidc-provider, the certified implementation) on a loopback port: its
// accounts are the people of the test, signed in through its own login and consent pages (its development
// interactions: any password). `extra` adds to its configuration (clients, features).

/** A person the provider knows: their id (what they type at its login page) and claims. */
export type Account = Record<string, unknown>;

export async function startIdentityProvider(opts: {
  accounts: Record<string, Account>;
  clients?: ClientMetadata[];
  extra?: Configuration;
}): Promise<{ issuer: string; provider: Provider; close: () => Promise<void> }> {
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const provider = new Provider(issuer, {
    clients: opts.clients ?? [],
    async findAccount(_ctx, id) {
      const claims = opts.accounts[id];
      if (!claims) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
    },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['preferred_username', 'name', 'groups'],
    },
    // Fixed keys: the provider's cookies signed the same across its restarts in a test.
    cookies: { keys: ['test-cookie-key-0123456789abcdef'] },
    ...opts.extra,
  });
  server.on('request', provider.callback());
  return {
    issuer,
    provider,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

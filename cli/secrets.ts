import { callRoute, type ServiceEndpoint } from '../lib/http/http-client.ts';
import { keyIdOf } from '../lib/identity/keys.ts';
import { gatewayRoutes as routes } from '../mcp-gateway/contract.ts';
import { type CliIo, EXIT, UsageError } from './io.ts';

// `toolshift secrets set|list|remove`: a person's own values of toolsets' secrets (their API key at an upstream),
// on the gateway's API with their own key (AGENT_API_TOKEN=<key>). A value is read from stdin, never from the
// command line, where other users (ps) and the shell's history would see it. `toolshift connect TOOLSET`: where
// in the console a person connects their own account (an OAuth grant happens in their browser), or drops it.

const COMMAND = 'secrets';

/** The person's key, sent to the gateway; a usage error when AGENT_API_TOKEN is not a user's key. */
function asPerson(
  agent: ServiceEndpoint,
  gateway: ServiceEndpoint,
  command = COMMAND,
  example = 'toolshift secrets list',
): ServiceEndpoint {
  const bearer = /^Bearer\s+(.+)$/i.exec(String(agent.headers?.authorization ?? ''))?.[1];
  if (!bearer || keyIdOf(bearer) === undefined) {
    throw new UsageError(
      `${command === COMMAND ? 'secrets are' : 'a connection is'} a person's own: give your key, e.g. AGENT_API_TOKEN=tsk_… ${example}`,
      command,
    );
  }
  return { ...gateway, headers: { authorization: `Bearer ${bearer}` } };
}

export async function secretsCommand(
  args: string[],
  flags: { json?: boolean },
  endpoints: { agent: ServiceEndpoint; gateway: ServiceEndpoint },
  io: CliIo,
): Promise<number> {
  const [action = 'list', toolset, name, ...extra] = args;
  const gateway = asPerson(endpoints.agent, endpoints.gateway);
  const print = (json: unknown, text: string) =>
    io.stdout(flags.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
  if (action === 'list') {
    const { secrets } = await callRoute(gateway, routes.listSecrets);
    const rows = secrets.map((s) => `${s.toolset}  ${s.name}  set ${s.updated_at}`);
    print(
      secrets,
      rows.length > 0 ? rows.join('\n') : 'none of your own yet: toolshift secrets set TOOLSET NAME',
    );
    return EXIT.ok;
  }
  if (!toolset || !name || extra.length > 0) {
    throw new UsageError(
      `${action} takes a toolset and a secret's name: toolshift secrets ${action} TOOLSET NAME`,
      COMMAND,
    );
  }
  if (action === 'set') {
    if (io.stdinIsTTY || !io.readStdin) {
      throw new UsageError(
        `pipe the value in (it is never taken from the command line): printf %s "$VALUE" | toolshift secrets set ${toolset} ${name}`,
        COMMAND,
      );
    }
    const value = (await io.readStdin()).replace(/\r?\n$/, '');
    const info = await callRoute(gateway, routes.setSecret, { params: { toolset, name }, body: { value } });
    print(info, `set your ${name} for ${toolset}: your calls of its tools use it`);
    return EXIT.ok;
  }
  if (action === 'remove') {
    const removed = await callRoute(gateway, routes.removeSecret, { params: { toolset, name } });
    print(removed, `removed your ${name} for ${toolset}`);
    return EXIT.ok;
  }
  throw new UsageError(
    `unknown action "${action}": secrets list | set TOOLSET NAME | remove TOOLSET NAME`,
    COMMAND,
  );
}

/** `toolshift connect TOOLSET`: the console's page that connects it; `--revoke`: drops the person's grant. */
export async function connectCommand(
  args: string[],
  flags: { json?: boolean; revoke?: boolean },
  endpoints: { agent: ServiceEndpoint; gateway: ServiceEndpoint },
  io: CliIo,
): Promise<number> {
  const [toolset, ...extra] = args;
  if (!toolset || extra.length > 0) {
    throw new UsageError('connect takes one toolset: toolshift connect [--revoke] TOOLSET', 'connect');
  }
  if (flags.revoke) {
    const gateway = asPerson(
      endpoints.agent,
      endpoints.gateway,
      'connect',
      `toolshift connect --revoke ${toolset}`,
    );
    const dropped = await callRoute(gateway, routes.revokeConnection, { params: { toolset } });
    io.stdout(
      flags.json
        ? `${JSON.stringify(dropped)}\n`
        : `dropped your grant for ${toolset}: its next call of yours asks you to connect again\n`,
    );
    return EXIT.ok;
  }
  const url = `${endpoints.agent.baseUrl.replace(/\/$/, '')}/console/connect/${encodeURIComponent(toolset)}`;
  io.stdout(
    flags.json
      ? `${JSON.stringify({ toolset, connect_url: url })}\n`
      : `open this in the browser you use the console with (logged in as yourself):\n  ${url}\n`,
  );
  return EXIT.ok;
}

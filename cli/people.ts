import { readFile } from 'node:fs/promises';
import { callRoute, type ServiceEndpoint } from '../lib/http/http-client.ts';
import { gatewayRoutes as routes } from '../mcp-gateway/contract.ts';
import { type CliIo, EXIT, UsageError } from './io.ts';

// `toolshift users|keys|teams`: the operator's people on the gateway's admin API (it sends GATEWAY_ADMIN_TOKEN).
// A key is printed once, when it is made; the daemon keeps only its hash.

/** The flags these commands read. */
export interface PeopleFlags {
  json: boolean;
  email?: string;
  team?: string[];
  user?: string;
  role?: string;
  expires?: string;
  label?: string;
  'tasks-per-hour'?: string;
  'tokens-per-day'?: string;
  'tool-calls-per-minute'?: string;
}

type Limits = {
  tasks_per_hour?: number | null;
  model_tokens_per_day?: number | null;
  tool_calls_per_minute?: number | null;
};

const LIMIT_FLAGS = [
  ['tasks-per-hour', 'tasks_per_hour'],
  ['tokens-per-day', 'model_tokens_per_day'],
  ['tool-calls-per-minute', 'tool_calls_per_minute'],
] as const;

/** The limits the flags set (`none`: unlimited again). */
function limitsOf(flags: PeopleFlags, command: string): Limits {
  const out: Limits = {};
  for (const [flag, name] of LIMIT_FLAGS) {
    const v = flags[flag];
    if (v === undefined) continue;
    if (v === 'none') out[name] = null;
    else if (/^\d{1,13}$/.test(v)) out[name] = Number(v);
    else throw new UsageError(`--${flag} takes a whole number or none, got "${v}"`, command);
  }
  return out;
}

const limitsText = (l: Limits) =>
  LIMIT_FLAGS.flatMap(([flag, name]) => (l[name] == null ? [] : [`${flag} ${l[name]}`])).join(', ') || 'none';

function need(value: string | undefined, what: string, command: string): string {
  if (!value) throw new UsageError(`${what} is missing`, command);
  return value;
}

const print = (io: CliIo, flags: PeopleFlags, json: unknown, text: string) =>
  io.stdout(flags.json ? `${JSON.stringify(json)}\n` : `${text}\n`);

/** `toolshift users list|add|remove|limits`. */
export async function usersCommand(args: string[], flags: PeopleFlags, gateway: ServiceEndpoint, io: CliIo) {
  const [sub = 'list', name] = args;
  switch (sub) {
    case 'list': {
      const { users } = await callRoute(gateway, routes.listUsers, {});
      const rows = users.map(
        (u) =>
          `${u.name.padEnd(20)} ${(u.teams.join(',') || '-').padEnd(20)} limits: ${limitsText(u.limits)}`,
      );
      print(io, flags, users, users.length ? rows.join('\n') : 'no users yet: toolshift users add NAME');
      return EXIT.ok;
    }
    case 'add': {
      const body = {
        name: need(name, 'the user name (toolshift users add NAME)', 'users'),
        ...(flags.email ? { email: flags.email } : {}),
        ...(flags.team?.length ? { teams: flags.team } : {}),
        limits: limitsOf(flags, 'users'),
      };
      const user = await callRoute(gateway, routes.addUser, { body });
      print(
        io,
        flags,
        user,
        `added user ${user.name}; give them a key: toolshift keys create --user ${user.name} --role runner`,
      );
      return EXIT.ok;
    }
    case 'remove': {
      await callRoute(gateway, routes.removeUser, { params: { name: need(name, 'the user name', 'users') } });
      print(io, flags, { removed: name }, `removed user ${name}; their keys are refused from now on`);
      return EXIT.ok;
    }
    case 'limits': {
      const params = { name: need(name, 'the user name', 'users') };
      const user = await callRoute(gateway, routes.setUserLimits, {
        params,
        body: { limits: limitsOf(flags, 'users') },
      });
      print(io, flags, user, `user ${user.name} limits: ${limitsText(user.limits)}`);
      return EXIT.ok;
    }
    default:
      throw new UsageError(`unknown users command "${sub}"; use list, add, remove or limits`, 'users');
  }
}

/** `toolshift keys list|create|revoke`. */
export async function keysCommand(args: string[], flags: PeopleFlags, gateway: ServiceEndpoint, io: CliIo) {
  const [sub = 'list', id] = args;
  switch (sub) {
    case 'list': {
      const { keys } = await callRoute(gateway, routes.listKeys, {
        query: flags.user ? { user: flags.user } : {},
      });
      const state = (k: (typeof keys)[number]) =>
        k.revoked_at ? `revoked ${k.revoked_at}` : k.expires_at ? `expires ${k.expires_at}` : 'no expiry';
      const rows = keys.map(
        (k) =>
          `${k.id}  ${k.user.padEnd(16)} ${k.role.padEnd(9)} ${state(k).padEnd(32)} last used ${k.last_used_at ?? 'never'}`,
      );
      print(
        io,
        flags,
        keys,
        keys.length ? rows.join('\n') : 'no keys yet: toolshift keys create --user NAME --role runner',
      );
      return EXIT.ok;
    }
    case 'create': {
      const role = need(flags.role, '--role (viewer, runner, approver or operator)', 'keys');
      const body = {
        user: need(flags.user, '--user NAME', 'keys'),
        role: role as 'viewer' | 'runner' | 'approver' | 'operator',
        ...(flags.expires ? { expires_in: flags.expires } : {}),
        ...(flags.label ? { label: flags.label } : {}),
      };
      const made = await callRoute(gateway, routes.createKey, { body });
      const until = made.expires_at ? `, expires ${made.expires_at}` : '';
      print(
        io,
        flags,
        made,
        `${made.key}\nkey ${made.id} for ${made.user} (${made.role}${until}): shown this once, only its hash is kept`,
      );
      return EXIT.ok;
    }
    case 'revoke': {
      const key = await callRoute(gateway, routes.revokeKey, {
        params: { id: need(id, 'the key id', 'keys') },
      });
      print(io, flags, key, `revoked key ${key.id} of ${key.user}`);
      return EXIT.ok;
    }
    default:
      throw new UsageError(`unknown keys command "${sub}"; use list, create or revoke`, 'keys');
  }
}

/** `toolshift teams list|add|remove|join|leave|limits`. */
export async function teamsCommand(args: string[], flags: PeopleFlags, gateway: ServiceEndpoint, io: CliIo) {
  const [sub = 'list', name, user] = args;
  const team = () => need(name, 'the team name', 'teams');
  switch (sub) {
    case 'list': {
      const { teams } = await callRoute(gateway, routes.listTeams, {});
      const rows = teams.map(
        (t) =>
          `${t.name.padEnd(20)} members: ${t.members.join(', ') || '-'}; limits: ${limitsText(t.limits)}` +
          (t.disabled_toolsets.length > 0 ? `; may not use: ${t.disabled_toolsets.join(', ')}` : ''),
      );
      print(io, flags, teams, teams.length ? rows.join('\n') : 'no teams yet: toolshift teams add NAME');
      return EXIT.ok;
    }
    case 'add': {
      const t = await callRoute(gateway, routes.addTeam, {
        body: { name: team(), limits: limitsOf(flags, 'teams') },
      });
      print(io, flags, t, `added team ${t.name}; put users in it: toolshift teams join ${t.name} USER`);
      return EXIT.ok;
    }
    case 'remove': {
      await callRoute(gateway, routes.removeTeam, { params: { name: team() } });
      print(io, flags, { removed: name }, `removed team ${name}`);
      return EXIT.ok;
    }
    case 'join':
    case 'leave': {
      const params = {
        name: team(),
        user: need(user, `the user (toolshift teams ${sub} TEAM USER)`, 'teams'),
      };
      const t = await callRoute(gateway, sub === 'join' ? routes.addMember : routes.removeMember, { params });
      print(io, flags, t, `team ${t.name} members: ${t.members.join(', ') || '-'}`);
      return EXIT.ok;
    }
    case 'disable':
    case 'enable': {
      const ids = args.slice(2);
      if (ids.length === 0)
        throw new UsageError(`name the toolsets: toolshift teams ${sub} TEAM TOOLSET...`, 'teams');
      const t = await callRoute(gateway, routes.setTeamToolsets, {
        params: { name: team() },
        body: { [sub]: ids },
      });
      print(
        io,
        flags,
        t,
        `team ${t.name} may not use: ${t.disabled_toolsets.join(', ') || 'nothing disabled'}`,
      );
      return EXIT.ok;
    }
    case 'policy':
      return teamPolicy(team(), user, flags, gateway, io);
    case 'limits': {
      const t = await callRoute(gateway, routes.setTeamLimits, {
        params: { name: team() },
        body: { limits: limitsOf(flags, 'teams') },
      });
      print(io, flags, t, `team ${t.name} limits: ${limitsText(t.limits)}`);
      return EXIT.ok;
    }
    default:
      throw new UsageError(
        `unknown teams command "${sub}"; use list, add, remove, join, leave or limits`,
        'teams',
      );
  }
}

/** `teams policy TEAM FILE`: the team's policy overlay from a YAML file (the policy file's form); `none` takes it away. */
async function teamPolicy(
  team: string,
  file: string | undefined,
  flags: PeopleFlags,
  gateway: ServiceEndpoint,
  io: CliIo,
) {
  const path = need(file, 'the policy file (toolshift teams policy TEAM FILE, or none)', 'teams');
  const policy = path === 'none' ? null : await readFile(path, 'utf8');
  const t = await callRoute(gateway, routes.setTeamPolicy, { params: { name: team }, body: { policy } });
  print(
    io,
    flags,
    t,
    t.policy === null
      ? `team ${t.name} has no policy of its own`
      : `team ${t.name}'s policy set from ${path}`,
  );
  return EXIT.ok;
}

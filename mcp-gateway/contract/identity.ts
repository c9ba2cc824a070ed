import { z } from 'zod';
import type { RouteSpec } from '../../lib/http/contract.ts';
import { ErrorBody } from '../../lib/http/contract.ts';
import { boundedList, boundedString, LIMITS } from '../../lib/http/limits.ts';
import { ToolsetId } from './base.ts';

// The gateway's contract, part four: the operator's people — users, their API keys, teams, and the limits of
// each (lib/identity keeps them; every service takes the keys). contract.ts re-exports it.

const NAME_RULE = "1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit";
export const PersonName = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, `a name is ${NAME_RULE}`);
export const KeyRoleName = z.enum(['viewer', 'runner', 'approver', 'operator'], {
  error: 'a key role is viewer, runner, approver or operator',
});

/** A user's or team's limits; a limit left out is not limited (null in a change: unlimited again). */
export const UsageLimits = z.strictObject({
  tasks_per_hour: z.int().min(0).max(1_000_000_000).nullable().optional(),
  model_tokens_per_day: z.int().min(0).max(1_000_000_000_000).nullable().optional(),
  tool_calls_per_minute: z.int().min(0).max(1_000_000_000).nullable().optional(),
});

export const UserInfo = z.object({
  id: z.string(),
  name: z.string(),
  email: z.string().nullable(),
  limits: UsageLimits,
  teams: z.array(z.string()),
  created_at: z.string(),
});

export const TeamInfo = z.object({
  id: z.string(),
  name: z.string(),
  limits: UsageLimits,
  members: z.array(z.string()),
  /** The toolsets its members may not use: the team's ceiling, inside the operator's. */
  disabled_toolsets: z.array(z.string()),
  /** Its policy overlay: rules in the policy file's YAML, applied on top of the operator's (null: none). */
  policy: z.string().nullable(),
  created_at: z.string(),
});

export const KeyInfo = z.object({
  id: z.string(),
  user: z.string(),
  role: KeyRoleName,
  label: z.string().nullable(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
});

export const AddUserRequest = z.strictObject({
  name: PersonName,
  email: boundedString(320).optional(),
  teams: boundedList(PersonName, LIMITS.ids).optional(),
  limits: UsageLimits.optional(),
});

export const CreateKeyRequest = z.strictObject({
  user: PersonName,
  role: KeyRoleName,
  /** How long until it expires: `30d`, `12h`, `90m`; absent: never. */
  expires_in: z
    .string()
    .regex(
      /^[1-9]\d{0,4}[dhm]$/,
      'expires_in is a whole number (1 or more) of days, hours or minutes: 30d, 12h, 90m',
    )
    .optional(),
  label: boundedString(200).optional(),
});

export const AddTeamRequest = z.strictObject({ name: PersonName, limits: UsageLimits.optional() });
export const LimitsRequest = z.strictObject({ limits: UsageLimits });
/** A team's policy overlay as YAML text (the operator's policy file's form), or null to take it away. */
export const TeamPolicyRequest = z.strictObject({ policy: boundedString(64 * 1024).nullable() });
const ToolsetIds = boundedList(ToolsetId, LIMITS.ids);
export const TeamToolsetsRequest = z
  .strictObject({ disable: ToolsetIds.optional(), enable: ToolsetIds.optional() })
  .refine(
    (b) => (b.disable?.length ?? 0) + (b.enable?.length ?? 0) > 0,
    'name toolsets to disable or enable',
  );

const named = z.object({ name: PersonName });
const admin = ['admin'] as const;
const refused = { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody };

export const identityRoutes = {
  listUsers: {
    method: 'get',
    path: '/mcp/admin/users',
    roles: admin,
    summary: 'The users, their teams and limits',
    responses: { 200: z.object({ users: z.array(UserInfo) }) },
  },
  addUser: {
    method: 'post',
    path: '/mcp/admin/users',
    roles: admin,
    summary: 'Adds a user (in teams, with limits); give them a key with POST /mcp/admin/keys',
    body: AddUserRequest,
    responses: { 201: UserInfo, ...refused },
  },
  removeUser: {
    method: 'delete',
    path: '/mcp/admin/users/{name}',
    roles: admin,
    summary: 'Removes a user; their keys are refused from now on',
    params: named,
    responses: { 200: z.object({ removed: z.string() }), 404: ErrorBody },
  },
  setUserLimits: {
    method: 'put',
    path: '/mcp/admin/users/{name}/limits',
    roles: admin,
    summary: "Changes a user's limits (the limits named; null: unlimited)",
    params: named,
    body: LimitsRequest,
    responses: { 200: UserInfo, ...refused },
  },
  listKeys: {
    method: 'get',
    path: '/mcp/admin/keys',
    roles: admin,
    summary: 'The API keys (never their secret), of one user with ?user=',
    query: z.object({ user: PersonName.optional() }),
    responses: { 200: z.object({ keys: z.array(KeyInfo) }) },
  },
  createKey: {
    method: 'post',
    path: '/mcp/admin/keys',
    roles: admin,
    summary: 'Makes a key for a user: the key is in this answer only (only its hash is kept)',
    body: CreateKeyRequest,
    responses: { 201: KeyInfo.extend({ key: z.string() }), ...refused },
  },
  revokeKey: {
    method: 'delete',
    path: '/mcp/admin/keys/{id}',
    roles: admin,
    summary: 'Revokes a key: refused from now on, on every service',
    params: z.object({
      id: z.string().regex(/^[a-z0-9]{10}$/, 'a key id is 10 lower-case letters and digits'),
    }),
    responses: { 200: KeyInfo, 404: ErrorBody },
  },
  listTeams: {
    method: 'get',
    path: '/mcp/admin/teams',
    roles: admin,
    summary: 'The teams, their members and limits',
    responses: { 200: z.object({ teams: z.array(TeamInfo) }) },
  },
  addTeam: {
    method: 'post',
    path: '/mcp/admin/teams',
    roles: admin,
    summary: 'Adds a team (with limits its members share)',
    body: AddTeamRequest,
    responses: { 201: TeamInfo, ...refused },
  },
  removeTeam: {
    method: 'delete',
    path: '/mcp/admin/teams/{name}',
    roles: admin,
    summary: 'Removes a team (its members stay users)',
    params: named,
    responses: { 200: z.object({ removed: z.string() }), 404: ErrorBody },
  },
  setTeamLimits: {
    method: 'put',
    path: '/mcp/admin/teams/{name}/limits',
    roles: admin,
    summary: "Changes a team's limits (the limits named; null: unlimited)",
    params: named,
    body: LimitsRequest,
    responses: { 200: TeamInfo, ...refused },
  },
  setTeamToolsets: {
    method: 'put',
    path: '/mcp/admin/teams/{name}/toolsets',
    roles: admin,
    summary:
      "Disables toolsets for a team's members, or lifts that (the team's ceiling, inside the operator's)",
    params: named,
    body: TeamToolsetsRequest,
    responses: { 200: TeamInfo, ...refused },
  },
  setTeamPolicy: {
    method: 'put',
    path: '/mcp/admin/teams/{name}/policy',
    roles: admin,
    summary:
      "Sets a team's policy overlay: rules in the policy file's YAML, on top of the operator's (stricter only)",
    params: named,
    body: TeamPolicyRequest,
    responses: { 200: TeamInfo, ...refused },
  },
  addMember: {
    method: 'put',
    path: '/mcp/admin/teams/{name}/members/{user}',
    roles: admin,
    summary: 'Puts a user in a team',
    params: z.object({ name: PersonName, user: PersonName }),
    responses: { 200: TeamInfo, 404: ErrorBody },
  },
  removeMember: {
    method: 'delete',
    path: '/mcp/admin/teams/{name}/members/{user}',
    roles: admin,
    summary: 'Takes a user out of a team',
    params: z.object({ name: PersonName, user: PersonName }),
    responses: { 200: TeamInfo, 404: ErrorBody },
  },
} as const satisfies Record<string, RouteSpec>;

import { z } from 'zod';
import type { RouteSpec } from '../../lib/http/contract.ts';
import { ErrorBody } from '../../lib/http/contract.ts';
import { ToolsetId } from './base.ts';

// The gateway's contract, part five: a person's own upstream accounts — the values they set for a toolset's
// `user_secrets` (their API key at its server), used instead of the shared ones for their calls. A user's key
// (or a signed-in MCP client) acts on their own; contract.ts re-exports it.

export const SecretName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]{0,63}$/,
    'a secret is named like an environment variable, e.g. GITHUB_TOKEN',
  );

export const SecretInfo = z.object({ toolset: z.string(), name: z.string(), updated_at: z.string() });

export const SetSecretRequest = z.strictObject({
  value: z.string().min(1, 'give a value').max(8192, 'a value is at most 8192 characters'),
});

const secretParams = z.object({ toolset: ToolsetId, name: SecretName });

/** Whether a person has connected their own account for a toolset: its secrets set (or, for OAuth, a grant). */
export const ConnectionInfo = z.object({
  toolset: z.string(),
  connected: z.boolean(),
  /** What the person still has to set or do (the secrets' names), when not connected. */
  missing: z.array(z.string()),
  /** Where they connect it (the console's page). */
  connect_url: z.string().optional(),
  /** An OAuth toolset: the scopes the person granted (never a token). */
  scopes: z.array(z.string()).optional(),
});

const Scope = z
  .string()
  .regex(/^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/, 'a scope is 1-128 printable characters, no space');

export const StartConnectionRequest = z.strictObject({
  /** Where the authorization server sends the person back: the console's /console/connect/callback. */
  redirect_uri: z
    .string()
    .max(2000, 'a redirect_uri is at most 2000 characters')
    .regex(
      /^https?:\/\/[^\s]+\/console\/connect\/callback$/,
      "redirect_uri is the console's <url>/console/connect/callback",
    ),
  /** The scopes to ask for (those an activation needed); default: the toolset's own (oauth.scopes). */
  scopes: z.array(Scope).max(100, 'at most 100 scopes').optional(),
});

export const CompleteConnectionRequest = z.strictObject({
  code: z.string().min(1, 'give the code').max(4096, 'a code is at most 4096 characters'),
  state: z.string().min(1, 'give the state').max(512, 'a state is at most 512 characters'),
});
const own = ['mcp'] as const;

export const accountRoutes = {
  listSecrets: {
    method: 'get',
    path: '/mcp/me/secrets',
    roles: ['mcp', 'viewer'],
    summary: 'The names of your own values of toolsets’ secrets (never the values)',
    responses: { 200: z.object({ secrets: z.array(SecretInfo) }), 400: ErrorBody },
  },
  setSecret: {
    method: 'put',
    path: '/mcp/me/secrets/{toolset}/{name}',
    roles: own,
    summary: "Sets your own value of a toolset's secret (it names it under user_secrets), sealed",
    params: secretParams,
    body: SetSecretRequest,
    responses: { 200: SecretInfo, 400: ErrorBody, 404: ErrorBody },
  },
  removeSecret: {
    method: 'delete',
    path: '/mcp/me/secrets/{toolset}/{name}',
    roles: own,
    summary: "Removes your own value of a toolset's secret (the shared one is used again, if there is one)",
    params: secretParams,
    responses: { 200: z.object({ removed: z.string() }), 400: ErrorBody, 404: ErrorBody },
  },
  listConnections: {
    method: 'get',
    path: '/mcp/me/connections',
    roles: ['mcp', 'viewer'],
    summary: 'The toolsets that take your own account, and whether you have connected each',
    responses: { 200: z.object({ connections: z.array(ConnectionInfo) }), 400: ErrorBody },
  },
  connectionFor: {
    method: 'get',
    path: '/mcp/connections/{toolset}',
    roles: ['agent'],
    summary:
      "Whether the owner of a task (for_user) has connected their own account for a toolset (the agent's wait)",
    params: z.object({ toolset: ToolsetId }),
    query: z.object({ for_user: z.string().regex(/^user:[A-Za-z0-9_-]{1,64}$/, 'for_user is user:<id>') }),
    responses: { 200: ConnectionInfo, 404: ErrorBody },
  },
  startConnection: {
    method: 'post',
    path: '/mcp/me/connections/{toolset}',
    roles: own,
    summary:
      "Starts connecting your own account at an OAuth toolset's server: the URL of its consent page (PKCE; the state is yours, used once)",
    params: z.object({ toolset: ToolsetId }),
    body: StartConnectionRequest,
    responses: {
      200: z.object({ authorization_url: z.string() }),
      400: ErrorBody,
      404: ErrorBody,
      502: ErrorBody,
    },
  },
  completeConnection: {
    method: 'post',
    path: '/mcp/me/connections/{toolset}/complete',
    roles: own,
    summary:
      "Completes your connection with the server's code and your flow's state: your grant is saved (sealed)",
    params: z.object({ toolset: ToolsetId }),
    body: CompleteConnectionRequest,
    responses: {
      200: z.object({ toolset: z.string(), scopes: z.array(z.string()) }),
      400: ErrorBody,
      403: ErrorBody,
      502: ErrorBody,
    },
  },
  revokeConnection: {
    method: 'delete',
    path: '/mcp/me/connections/{toolset}',
    roles: own,
    summary:
      "Drops your grant at an OAuth toolset's server (revoked there when it can); your next call asks again",
    params: z.object({ toolset: ToolsetId }),
    responses: { 200: z.object({ dropped: z.string() }), 400: ErrorBody, 404: ErrorBody },
  },
} satisfies Record<string, RouteSpec>;

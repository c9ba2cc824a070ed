import { z } from 'zod';
import { KEY_ROLES, type KeyRole } from '../identity/keys.ts';

// Signing in with the identity provider people already have (OpenID Connect): the console's sign-in
// (agent-server/console/oidc.ts) and the MCP endpoint as an OAuth protected resource (mcp-gateway), and the rule
// that says who is let in. Part of lib/config/config-schema.ts's EnvSchema and config-docs.ts's reference.

const text = z
  .string()
  .optional()
  .transform((v) => (v && v.trim() !== '' ? v.trim() : undefined));
const url = text.refine(
  (v) => v === undefined || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)),
  'must be an http(s) URL, e.g. https://id.example.com/realms/main',
);

/** An identity provider's address: https, or http on this machine only (a test's, a developer's). */
const providerUrl = url.refine(
  (v) => v === undefined || new URL(v).protocol === 'https:' || isLoopbackName(new URL(v).hostname),
  'must be an https URL (http only for a provider on this machine: localhost, 127.0.0.1, [::1])',
);

export const SIGN_IN_ENV = {
  OIDC_ISSUER: providerUrl,
  OIDC_CLIENT_ID: text,
  OIDC_CLIENT_SECRET: text,
  OIDC_REDIRECT_URL: url,
  OIDC_ALLOW: text,
  OIDC_GROUPS_CLAIM: z.string().trim().min(1).max(100).default('groups'),
  OIDC_ROLE: z.enum(KEY_ROLES, { message: `must be one of ${KEY_ROLES.join(', ')}` }).default('runner'),
  MCP_OAUTH_RESOURCE: url,
  MCP_OAUTH_ISSUER: providerUrl,
};

function isLoopbackName(host: string): boolean {
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export const SIGN_IN_SETTINGS = {
  title: 'Signing in with an identity provider (OpenID Connect)',
  intro:
    'People sign in to the console, and MCP clients to /mcp, with the provider they already have (docs/teams.md).',
  settings: {
    OIDC_ISSUER: {
      doc: "the provider's issuer URL (Keycloak, Entra ID, Google, Okta…); set with the client id: the console offers sign-in",
    },
    OIDC_CLIENT_ID: { doc: "the console's client id at the provider" },
    OIDC_CLIENT_SECRET: { doc: 'its secret (unset: a public client, PKCE only)' },
    OIDC_REDIRECT_URL: {
      doc: 'the redirect URL registered at the provider, as browsers reach the console (e.g. `https://toolshift.example.com/console/oidc/callback`; needed behind a proxy)',
      default: 'this request’s own address',
    },
    OIDC_ALLOW: {
      doc: 'who is made a user on first sign-in: comma-separated `@example.com` (a verified email domain) and `group:NAME` (a group claim); unset: only users the operator made, matched by verified email',
    },
    OIDC_GROUPS_CLAIM: { doc: 'the claim that lists a person’s groups' },
    OIDC_ROLE: {
      doc: 'what a signed-in person may do (viewer, runner, approver or operator); the token login stays for the operator',
    },
    MCP_OAUTH_RESOURCE: {
      doc: 'the MCP endpoint as clients reach it (e.g. `https://gw.example.com/mcp`): set, /mcp is an OAuth protected resource and takes access tokens whose audience it is',
    },
    MCP_OAUTH_ISSUER: { doc: 'the authorization server of /mcp', default: 'OIDC_ISSUER' },
  },
};

/** Who is made a user on first sign-in. */
export interface SignInRule {
  /** Verified email domains, lower case, without '@'. */
  domains: string[];
  groups: string[];
  groupsClaim: string;
  /** The role of a signed-in person's console login (and of users made by the rule). */
  role: KeyRole;
}

export interface SignInSettings {
  rule: SignInRule;
  /** The console's sign-in; undefined when off. */
  console?: { issuer: string; clientId: string; clientSecret?: string; redirectUrl?: string };
  /** /mcp as an OAuth protected resource; undefined when off. */
  mcp?: { resource: string; issuer: string };
}

type SignInEnv = {
  [K in keyof typeof SIGN_IN_ENV]: z.infer<(typeof SIGN_IN_ENV)[K]>;
};

/** The sign-in settings from the checked environment; throws naming the variable when they do not fit together. */
export function signInSettings(e: SignInEnv): SignInSettings {
  const rule = parseRule(e.OIDC_ALLOW ?? '', e.OIDC_GROUPS_CLAIM, e.OIDC_ROLE);
  if (e.OIDC_ISSUER !== undefined && e.OIDC_CLIENT_ID === undefined) {
    throw new Error(
      'Invalid configuration:\n  OIDC_CLIENT_ID: OIDC_ISSUER is set; the console needs its client id too',
    );
  }
  if (e.OIDC_CLIENT_ID !== undefined && e.OIDC_ISSUER === undefined) {
    throw new Error(
      'Invalid configuration:\n  OIDC_ISSUER: OIDC_CLIENT_ID is set; say which provider it is at',
    );
  }
  const alone = (['OIDC_CLIENT_SECRET', 'OIDC_REDIRECT_URL'] as const).find((n) => e[n] && !e.OIDC_ISSUER);
  if (alone)
    throw new Error(`Invalid configuration:\n  ${alone}: is set without OIDC_ISSUER, so nothing uses it`);
  if (e.OIDC_ALLOW && !e.OIDC_ISSUER && !e.MCP_OAUTH_RESOURCE) {
    throw new Error(
      'Invalid configuration:\n  OIDC_ALLOW: is set, but nobody signs in (set OIDC_ISSUER or MCP_OAUTH_RESOURCE)',
    );
  }
  if (e.OIDC_ROLE === 'operator' && (rule.domains.length > 0 || rule.groups.length > 0)) {
    throw new Error(
      'Invalid configuration:\n  OIDC_ROLE: operator for everyone OIDC_ALLOW lets in would make each of them the operator; ' +
        'sign in as runner or approver, and give the operator a key (toolshift keys create --role operator)',
    );
  }
  const mcpIssuer = e.MCP_OAUTH_ISSUER ?? e.OIDC_ISSUER;
  if (e.MCP_OAUTH_RESOURCE !== undefined && mcpIssuer === undefined) {
    throw new Error(
      'Invalid configuration:\n  MCP_OAUTH_ISSUER: MCP_OAUTH_RESOURCE is set; name the authorization server (or set OIDC_ISSUER)',
    );
  }
  return {
    rule,
    ...(e.OIDC_ISSUER && e.OIDC_CLIENT_ID
      ? {
          console: {
            issuer: e.OIDC_ISSUER,
            clientId: e.OIDC_CLIENT_ID,
            ...(e.OIDC_CLIENT_SECRET ? { clientSecret: e.OIDC_CLIENT_SECRET } : {}),
            ...(e.OIDC_REDIRECT_URL ? { redirectUrl: e.OIDC_REDIRECT_URL } : {}),
          },
        }
      : {}),
    ...(e.MCP_OAUTH_RESOURCE && mcpIssuer
      ? { mcp: { resource: e.MCP_OAUTH_RESOURCE, issuer: mcpIssuer } }
      : {}),
  };
}

/** OIDC_ALLOW: `@example.com` and `group:NAME`, comma-separated. */
export function parseRule(allow: string, groupsClaim: string, role: KeyRole): SignInRule {
  const rule: SignInRule = { domains: [], groups: [], groupsClaim, role };
  for (const part of allow.split(',').map((s) => s.trim())) {
    if (part === '') continue;
    if (/^@[a-z0-9.-]+\.[a-z]{2,}$/i.test(part)) rule.domains.push(part.slice(1).toLowerCase());
    else if (/^group:.{1,200}$/.test(part)) rule.groups.push(part.slice('group:'.length));
    else {
      throw new Error(
        `Invalid configuration:\n  OIDC_ALLOW: ${JSON.stringify(part.slice(0, 80))} is neither @domain (e.g. @example.com) nor group:NAME`,
      );
    }
  }
  return rule;
}

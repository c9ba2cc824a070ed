import { z } from 'zod';

// What a toolset file may say: its zod schema (toolset-files.ts reads and checks the files with it).

export const Name = z.string().regex(/^[a-z0-9_]{1,64}$/, 'must match ^[a-z0-9_]{1,64}$');
export const EnvName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a variable name like MEMORY_FILE_PATH');
export const Scalar = z.union([z.string(), z.number(), z.boolean()]).transform(String);

/** An OAuth scope (RFC 6749 §3.3: printable, no space, quote or backslash). */
export const Scope = z
  .string()
  .regex(
    /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/,
    'must be a scope: 1-128 printable characters, no space, " or \\',
  );

/** The gateway as each person's OAuth client of the server (`backend.mcp.oauth`). */
export const OAuthBlock = z.strictObject({
  // Asked for at every connection, whatever tools are activated.
  scopes: z.array(Scope).max(50, 'at most 50 scopes').default([]),
  // A client registered by hand at the authorization server; without it the gateway registers itself (RFC 7591).
  client_id: z.string().min(1).max(512).optional(),
  client_secret: z.string().min(1).max(512).optional(),
  // DEACTIVATE drops (and revokes) the person's token: the model's reach follows its tool list.
  revoke_on_deactivate: z.boolean().default(false),
});

export const McpBlock = z
  .strictObject({
    command: z.string().min(1).optional(),
    args: z.array(Scalar).optional(),
    env: z.record(EnvName, Scalar).optional(),
    cwd: z.string().min(1).optional(),
    url: z.string().min(1).optional(),
    headers: z.record(z.string().min(1), Scalar).optional(),
    protocol: z.enum(['legacy', 'auto', '2026-07-28']).optional(),
    oauth: OAuthBlock.optional(),
  })
  .superRefine((m, ctx) => {
    if ((m.command === undefined) === (m.url === undefined)) {
      ctx.addIssue({
        code: 'custom',
        message: 'give either command (a stdio server) or url (Streamable HTTP)',
      });
    }
    for (const key of ['args', 'env', 'cwd'] as const) {
      if (m.url !== undefined && m[key] !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `${key} is for stdio servers (command), not url`,
        });
    }
    if (m.oauth !== undefined && m.url === undefined)
      ctx.addIssue({ code: 'custom', path: ['oauth'], message: 'oauth is for url servers, not command' });
    if (m.oauth?.client_secret !== undefined && m.oauth.client_id === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['oauth', 'client_secret'],
        message:
          'client_secret goes with client_id (a registered client); leave both out to register dynamically',
      });
    if (m.command !== undefined && m.headers !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['headers'],
        message: 'headers are for url servers, not command',
      });
  });

// Unknown keys are refused, at the top as in the mcp block: a misspelt key (`tool:`, `defualt:`) must not be
// silently ignored.
export const ToolsetFile = z.strictObject(
  {
    id: Name,
    description: z.string().trim().min(1, 'must not be empty'),
    // For discovery only: how people ask for what the toolset does, where its own descriptions are thin.
    keywords: z
      .array(z.string().trim().min(1, 'must not be empty').max(80, 'must be at most 80 characters'))
      .max(200, 'at most 200 keywords')
      .default([]),
    default: z.boolean().default(false),
    backend: z.union([z.string().min(1), z.strictObject({ mcp: McpBlock })]).default('tool-server'),
    tools: z
      .array(z.string().min(1).max(128))
      .min(1, 'list at least one tool, or leave tools out')
      .optional(),
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1-32 letters, digits, _ or -')
      .optional(),
    pin: z.boolean().default(true),
    timeout_seconds: z.number().positive().max(3600).default(60),
    // The environment variables the file's ${VAR} references may use; anything else is the file's error.
    variables: z.array(EnvName).max(100, 'at most 100 variables').default([]),
    // Dangerous: toolshift's own settings (its model key, tokens, database URL) this file may send to its
    // server. Only the operator writes these, by name.
    allow_toolshift_settings: z.array(EnvName).max(100, 'at most 100 settings').default([]),
    // Of those variables, the ones each person may set for themselves (`toolshift secrets set`): their own API
    // key at the server, used instead of the shared value for their calls.
    user_secrets: z.array(EnvName).max(20, 'at most 20 user secrets').default([]),
    // For an oauth backend: the scopes each of the server's tools (its own name) needs; ACTIVATE asks for those
    // of the tools being activated only.
    tool_scopes: z
      .record(z.string().min(1).max(128), z.array(Scope).max(20, 'at most 20 scopes a tool'))
      .default({}),
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')}; a toolset file has ` +
          'id, description, keywords, default, backend, tools, prefix, pin, timeout_seconds, variables, ' +
          'allow_toolshift_settings, user_secrets, tool_scopes'
        : undefined,
  },
);

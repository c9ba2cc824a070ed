import { EnvSchema } from './config.ts';
import { SIGN_IN_SETTINGS } from './sign-in.ts';
import { TRACE_SETTINGS } from './trace-settings.ts';

// What each setting means, grouped by the part of the daemon that reads it: the source of the configuration
// reference (docs/configuration.md) and of .env.example, both written by `npm run config:docs` and checked
// against this file by a test. A variable lib/config/config.ts reads but this file does not describe fails that test.

/** One setting: what it does, and its default when the schema's own would read badly. */
interface Setting {
  doc: string;
  default?: string;
}

/** A part of the daemon and the settings it reads, in the order the reference shows them. */
interface Group {
  title: string;
  /** Written above the group in .env.example. */
  intro?: string;
  settings: Record<string, Setting>;
}

export const SETTING_GROUPS: Group[] = [
  {
    title: 'The model and tasks (agent-server)',
    intro:
      'The model: any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp, LM Studio …), or Anthropic (ANTHROPIC_*).',
    settings: {
      AGENT_PROVIDER: {
        doc:
          'the API spoken to the model: `openai-chat` (chat completions), `openai-responses` (the Responses API, ' +
          'stateless) or `anthropic` (Messages API, prompt caching with `cache_control` breakpoints); ' +
          'docs/providers.md',
        default: 'from the endpoint: `anthropic` when only ANTHROPIC_* is set, else `openai-chat`',
      },
      OPENAI_BASE_URL: {
        doc: 'the OpenAI-compatible API, e.g. `http://127.0.0.1:11434/v1` for Ollama',
        default: "OpenAI's",
      },
      OPENAI_API_KEY: { doc: 'the key for it (not needed by most local servers)' },
      ANTHROPIC_BASE_URL: {
        doc: 'the Anthropic Messages API (AGENT_PROVIDER=anthropic)',
        default: "Anthropic's",
      },
      ANTHROPIC_API_KEY: { doc: 'the key for it' },
      AGENT_MODEL: {
        doc: 'the model name (anthropic: `claude-sonnet-4-5` unless set)',
        default: '`gpt-4o-mini`',
      },
      AGENT_MODEL_MAX_TOKENS: {
        doc: "a reply's output limit, where the API requires one (anthropic's `max_tokens`); a reply cut off at it is asked again",
      },
      AGENT_MAX_STEPS: { doc: 'default `max_steps` of a task' },
      AGENT_MODEL_TIMEOUT_MS: { doc: 'deadline of one model call' },
      AGENT_MODEL_MAX_ATTEMPTS: {
        doc: 'attempts per model call (429, 5xx and lost connections are retried)',
      },
      AGENT_MODEL_STREAM: {
        doc:
          'ask the model for its reply as a stream: followers of a task see the text as it comes (`model_delta` ' +
          'events); a stream cut off or stalled is retried. `false`: one whole reply per call',
      },
      AGENT_MODEL_STALL_MS: {
        doc: 'a streamed reply silent this long mid-reply is abandoned and retried (AGENT_MODEL_TIMEOUT_MS still bounds the call)',
      },
      AGENT_MAX_DURATION_S: {
        doc: "a task's wall-clock limit unless its request sets `max_duration_s` (then it ends `timed_out`)",
      },
      CONSENT_TIMEOUT_S: {
        doc: "how long a task waits (`awaiting_consent`) for its owner to connect their own account for a toolset before it fails; the task's own time limit still applies",
      },
      AGENT_SSE_HEARTBEAT_S: { doc: 'keep-alive comment interval of an idle task event stream' },
      RUN_CODE_CPU_MS: {
        doc: 'code mode: the computing time one run_code script may use (its tool calls and sleeps not counted)',
      },
      RUN_CODE_MEMORY_MB: { doc: "code mode: a script's heap (QuickJS's, in its worker thread)" },
      RUN_CODE_CALLS: { doc: 'code mode: the tool calls one script may make' },
      RUN_CODE_OUTPUT_KB: { doc: 'code mode: what one script may print and return, together' },
      RUN_CODE_TIMEOUT_S: { doc: 'code mode: one run in all, tool calls and sleeps included' },
      AGENT_CONTEXT_TOKENS: {
        doc:
          "the model's context window in tokens: near it a thread's conversation is compacted (old large tool results " +
          'moved out of view, readable by handle; then the oldest turns summarised)',
        default: "the model family's window (e.g. 128000 for gpt-4o, 200000 for Claude), else 8192",
      },
      MAX_CONCURRENT_TASKS: {
        doc: 'tasks one agent-server runs at once; more are queued (`queued`, 202 when not waiting) and start as slots free',
      },
      MAX_QUEUED_TASKS: {
        doc: 'tasks that may wait for a slot, kept across a restart (past it: 503 with `retry-after`; 0: no queue)',
      },
      AGENT_ROLE: {
        doc:
          '`all`: the agent API and a task worker in one; `api`: the API only (tasks wait for workers); `worker`: ' +
          'runs queued tasks, serving only /health and /metrics (`toolshift serve worker`). `api` and `worker` need DATABASE_URL',
      },
      TASK_LEASE_S: {
        doc:
          "how long a worker's claim on a running task lasts unrenewed (heartbeat every third); a task whose worker " +
          'stopped goes to another worker this long after',
      },
      TOKENIZER: {
        doc: 'the encoding tokens are counted in: `o200k_base`, `cl100k_base`, `p50k_base`, `r50k_base`, `gpt2`',
      },
      TOOL_TOKEN_BUDGET: { doc: 'the most tool-definition tokens `manage_toolsets` may bring a session to' },
      AUTO_ACTIVATE: {
        doc: "a call of an inactive toolset's tool activates it in the same turn when an ACTIVATE would pass unasked; `false`: refused",
      },
      DISCOVERY_LEARNING: { doc: 'rank with keywords learned from use (upstream-servers.md); `false`: off' },
      TOOL_EXPOSURE: {
        doc:
          'how tasks offer tools: `auto` (every toolset active from the start when their definitions together fit ' +
          'AUTO_EXPOSURE_TOKENS, else `native`), `native` (the tools array follows the active toolsets), `dispatch` ' +
          '(always `[manage_toolsets, call_tool]`, so prompt caches hold) or `code` (always `[manage_toolsets, ' +
          "run_code]`: scripts against the tools, docs/code-mode.md); a request's `exposure` overrides it",
      },
      AUTO_EXPOSURE_TOKENS: {
        doc:
          "exposure `auto`: the catalog's tool-definition tokens up to which a task starts with every toolset " +
          'active (the default is where the bench’s tasks cost as much loaded whole as dynamic: `npm run bench`)',
      },
      AGENT_PRIME_TOOLSETS: {
        doc:
          'before the first model call, activate the toolset discovery is certain the goal needs (the model is told ' +
          "and may deactivate it; the ceiling, policy and budget apply); `false` turns it off; a request's `prime` overrides it",
      },
      AGENT_WEBHOOK_SECRET: {
        doc:
          "the secret tasks' webhooks are signed with (Standard Webhooks, `whsec_…`); `toolshift token webhook` " +
          'prints it',
        default: 'made on first start, kept in the credentials file',
      },
      AGENT_WEBHOOK_ALLOW_HOSTS: {
        doc: 'comma-separated `host` or `host:port` a webhook may be POSTed to although not public (e.g. `127.0.0.1:9000`)',
      },
      AGENT_WEBHOOK_TIMEOUT_S: { doc: "one webhook POST's deadline (connect, answer and its body)" },
      AGENT_WEBHOOK_MAX_AGE_S: {
        doc: 'how long a webhook is retried (exponential backoff with jitter) before it is given up as `failed`',
      },
    },
  },
  {
    title: 'Where the services listen, and who may call them (every service)',
    settings: {
      HOST: { doc: 'listen address of all three services' },
      AGENT_PORT: { doc: "the agent-server's port" },
      GATEWAY_PORT: { doc: "the gateway's port" },
      TOOL_SERVER_PORT: { doc: "the tool-server's port" },
      AGENT_URL: {
        doc: 'where the agent-server is, for the CLI (from its environment, not a .env; stored tokens go only to recorded addresses)',
        default: 'the recorded address, else from HOST and the port',
      },
      GATEWAY_URL: {
        doc: 'where the gateway is (for the agent-server and the CLI)',
        default: 'from HOST and the port (the CLI: the recorded address first)',
      },
      TOOL_SERVER_URL: { doc: 'where the tool-server is', default: 'from HOST and the port' },
      TOOLSHIFT_AUTH: {
        doc: '`none`: make no tokens; routes without a configured token are open to local processes',
      },
      TOOLSHIFT_CREDENTIALS_FILE: {
        doc: 'where generated tokens are kept (mode 0600)',
        default: '`$TOOLSHIFT_DATA_DIR/credentials.json`',
      },
      AGENT_API_TOKEN: { doc: "the agent-server's own API (tasks, events)", default: 'generated' },
      GATEWAY_ADMIN_TOKEN: { doc: "the operator's token at the gateway (everything)", default: 'generated' },
      GATEWAY_AGENT_TOKEN: {
        doc: "the agent-server's token at the gateway (sessions' toolsets and tool calls only)",
        default: 'generated',
      },
      GATEWAY_MCP_TOKEN: {
        doc: "the MCP face's token (`/mcp`); handles and sessions are bound to it",
        default: 'generated',
      },
      TOOL_SERVER_TOKEN: { doc: "the gateway's token at the tool-server", default: 'generated' },
      GATEWAY_SEAL_KEY: {
        doc: "what the gateway seals people's own upstream credentials with (their keys and OAuth tokens); the same on every replica",
        default: 'generated',
      },
      VIEWER_TOKEN: {
        doc: 'read-only access to the agent-server and the gateway (a console login that changes nothing)',
        default: 'generated',
      },
      CONSOLE_SESSION_H: { doc: 'how long a console login lasts, in hours', default: '12' },
      TOOLSHIFT_INSECURE: { doc: '`1`: listen on a non-loopback `HOST` without the tokens anyway' },
      ALLOWED_HOSTS: { doc: 'comma-separated `Host` names accepted besides loopback' },
      ALLOWED_ORIGINS: { doc: 'comma-separated browser origins accepted besides loopback' },
      MAX_CONNECTIONS: { doc: 'open connections per service (past it: 503 with `Retry-After`)' },
      MAX_SSE_STREAMS: { doc: 'held-open event streams per service (past it: 429)' },
      MAX_SSE_STREAMS_PER_CREDENTIAL: { doc: 'held-open event streams per credential (past it: 429)' },
      HEADERS_TIMEOUT_S: { doc: "time for a request's headers to arrive (past it: 408)" },
      REQUEST_TIMEOUT_S: { doc: 'time for a whole request to arrive (past it: 408)' },
    },
  },
  {
    title: 'Toolsets, upstream servers, the MCP face and the policy (mcp-gateway)',
    settings: {
      TOOLSETS_DIR: {
        doc: 'the shipped toolset files',
        default: '`toolsets/` of the installation',
      },
      USER_TOOLSETS_DIR: {
        doc: "the user's toolset files (`toolshift toolsets import` writes there), loaded after the shipped ones",
        default: '`$TOOLSHIFT_DATA_DIR/toolsets`',
      },
      PROMPTS_DIR: { doc: 'playbook prompt files', default: '`prompts/` of the installation' },
      POLICY_FILE: {
        doc: "the operator's policy (absent: everything allowed)",
        default: '`$TOOLSHIFT_DATA_DIR/policy.yaml`',
      },
      APPROVAL_TIMEOUT_S: { doc: 'how long an approval may stay pending before the call counts as refused' },
      MAX_CALLS_PER_MINUTE: { doc: 'tool calls per session per minute' },
      MAX_ACTIVATIONS_PER_TASK: { doc: 'toolset activations per task' },
      MCP_ALLOWED_HOSTS: { doc: 'extra `Host` names for the gateway (and its MCP face)' },
      MCP_ALLOWED_ORIGINS: { doc: 'extra browser origins for the gateway (and its MCP face)' },
      MCP_HANDLE_IDLE_S: { doc: 'idle lifetime of a session handle (both legs)' },
      MCP_SESSION_IDLE_S: { doc: 'idle lifetime of a legacy MCP session (kept across restarts)' },
      MCP_MAX_SESSIONS: {
        doc: 'open legacy MCP sessions per credential (its least recently used idle one is closed for a new one)',
      },
      UPSTREAM_MAX_MESSAGE_BYTES: {
        doc: 'the largest message an upstream MCP server may send (a stdio line, an HTTP body, one SSE event); 64 KiB to 256 MiB',
      },
      UPSTREAM_MAX_RESULT_BYTES: {
        doc: "the most of an upstream tool's result the model is given (cut with a marker)",
      },
      UPSTREAM_MAX_PROCESSES: {
        doc: 'the most stdio MCP servers one gateway runs at once (one process per server); starting one more stops the least recently used one with no call in flight',
      },
      UPSTREAM_IDLE_S: {
        doc: 'a stdio MCP server unused this long is stopped, and started again on its next use (0: never); what it kept only in memory is lost then',
      },
      UPSTREAM_MAX_CONCURRENT_CALLS: {
        doc: 'calls in flight at once per upstream server, every session together; more wait (within their timeout) in a queue per session, and a freed place goes to the waiting session with the fewest in flight',
      },
      UPSTREAM_MAX_CALLS_PER_SESSION: {
        doc: "calls in flight at once per upstream server for one session (at most `UPSTREAM_MAX_CONCURRENT_CALLS`); four times as many may wait, beyond that only that session's call is refused, without running",
      },
    },
  },
  {
    title: 'Files, the web, git and databases (tool-server)',
    settings: {
      FS_ROOTS: {
        doc: 'filesystem roots, `:`-separated; each must exist (only the default workspace is created)',
        default: '`$TOOLSHIFT_DATA_DIR/workspace`',
      },
      FS_READONLY_ROOTS: { doc: 'roots the file tools may read but not change, `:`-separated' },
      FS_MAX_READ_BYTES: { doc: 'cap of one text read' },
      BRAVE_API_KEY: { doc: 'Brave Search API key for `web_search`' },
      FETCH_ALLOW_HOSTS: {
        doc: 'comma-separated `host` or `host:port` that `fetch_url` may reach although not public (e.g. `127.0.0.1:8080`)',
      },
      FETCH_TIMEOUT_MS: { doc: "`fetch_url`'s total deadline" },
      FETCH_MAX_BYTES: { doc: "`fetch_url`'s cap on the decoded body" },
      FETCH_USE_PROXY: { doc: '`1`: `fetch_url` goes through `HTTP_PROXY`/`HTTPS_PROXY` (and `NO_PROXY`)' },
      HTTP_PROXY: { doc: 'the proxy for http URLs, with `FETCH_USE_PROXY=1` (also `http_proxy`)' },
      http_proxy: { doc: 'as `HTTP_PROXY`' },
      HTTPS_PROXY: { doc: 'the proxy for https URLs, with `FETCH_USE_PROXY=1` (also `https_proxy`)' },
      https_proxy: { doc: 'as `HTTPS_PROXY`' },
      NO_PROXY: { doc: 'hosts reached without the proxy (also `no_proxy`)' },
      no_proxy: { doc: 'as `NO_PROXY`' },
      GITHUB_TOKEN: {
        doc: 'optional token for `get_github_pull_request_info` (private repositories, 5,000 requests an hour)',
      },
      GITHUB_API_URL: {
        doc: 'GitHub REST base; GitHub Enterprise: `https://HOST/api/v3`',
        default: '`https://api.github.com`',
      },
      GIT_TOOLS_TIMEOUT_MS: { doc: 'deadline of one git command (and GitHub request)' },
      GIT_TOOLS_MAX_OUTPUT_BYTES: { doc: 'cap of one git output (patches)' },
      DB_QUERY_TIMEOUT_MS: { doc: "deadline of one database call; the query's process is killed after it" },
      DB_MAX_ROWS: { doc: 'most rows one `query` returns (caps `max_rows`)' },
      DB_MAX_RESULT_BYTES: { doc: "cap on the JSON size of a query's rows" },
    },
  },
  {
    title: 'Data, retention and logs (every service)',
    settings: {
      TOOLSHIFT_DATA_DIR: {
        doc: 'SQLite files (`gateway.db`, `agent.db`, WAL mode), the generated credentials, your toolsets and the default workspace; `toolshift serve --data-dir` sets it too',
        default:
          "the user's data directory: `$XDG_DATA_HOME/toolshift`, else `~/.local/share/toolshift` (macOS: `~/Library/Application Support/toolshift`)",
      },
      DATABASE_URL: {
        doc: "PostgreSQL (`postgres://user:password@host:5432/db`) for the agent-server's tasks and events and the gateway's state (sessions, ceiling, pins, approvals, handles, audit), shared by every replica; schemas migrated at start",
        default: 'unset: SQLite (`agent.db`, `gateway.db`) in the data directory',
      },
      AUDIT_RETENTION_DAYS: { doc: 'audit rows older than this are deleted (0: kept for ever)' },
      AUDIT_MAX_ROWS: { doc: 'the oldest audit rows beyond this many are deleted' },
      TASK_RETENTION_DAYS: {
        doc:
          'threads with no turn for this long are deleted with their tasks (and events), and finished tasks of no thread ' +
          'this old; running, queued and paused ones never',
      },
      APPROVAL_RETENTION_DAYS: {
        doc: 'approvals decided, expired or used this long ago are deleted; pending ones never',
      },
      SESSION_RETENTION_DAYS: {
        doc: 'gateway sessions with no MCP handle and no audited activity for this long are deleted',
      },
      RETENTION_INTERVAL_S: { doc: 'how often the retention sweep runs (also once at start)' },
      LOG_LEVEL: { doc: 'pino level (`silent` to mute; `debug` adds an access line per request)' },
      LOG_FORMAT: { doc: '`json`, `pretty`, or `auto`: pretty when stdout is a terminal' },
    },
  },
  TRACE_SETTINGS,
  SIGN_IN_SETTINGS,
  {
    title: 'Outside the schema: `npm start` and the CLI',
    settings: {
      TOOLSHIFT_THREADS: {
        doc: '`npm start` only: `2` runs the gateway and the tool-server on a second thread (two cores)',
        default: '`1`',
      },
      TOOLSHIFT_LINK: {
        doc: '`npm start` only: `http` has the services call each other over loopback HTTP, as separate processes do, instead of in-process (to watch every hop in the access log, or compare)',
        default: '`in-process`',
      },
      TOOLSHIFT_RECONNECT_S: {
        doc: 'how long `toolshift run` and `tasks watch` wait for a daemon that went away mid-task (0–86400)',
        default: '`60`',
      },
      NO_COLOR: { doc: 'any value: the CLI prints no colour' },
    },
  },
];

/** Settings read outside lib/config/config.ts's schema (their readers validate them). */
const OUTSIDE_SCHEMA = new Set(['TOOLSHIFT_THREADS', 'TOOLSHIFT_LINK', 'TOOLSHIFT_RECONNECT_S', 'NO_COLOR']);

/** A setting's default as the reference shows it: the group's own text, else what the schema makes of nothing. */
function defaultOf(name: string, setting: Setting): string {
  if (setting.default) return setting.default;
  if (OUTSIDE_SCHEMA.has(name)) return '—';
  const shape = EnvSchema.shape as Record<
    string,
    { safeParse(v: unknown): { success: boolean; data?: unknown } }
  >;
  const parsed = shape[name]?.safeParse(undefined);
  const value = parsed?.success ? parsed.data : undefined;
  if (value === undefined || value === false || (Array.isArray(value) && value.length === 0)) return '—';
  return `\`${String(value)}\``;
}

/** Variables the schema reads that no group describes, and described ones the schema does not read. */
export function undocumentedSettings(): { undocumented: string[]; unknown: string[] } {
  const documented = new Set(SETTING_GROUPS.flatMap((g) => Object.keys(g.settings)));
  const read = Object.keys(EnvSchema.shape);
  return {
    undocumented: read.filter((name) => !documented.has(name)),
    unknown: [...documented].filter((name) => !read.includes(name) && !OUTSIDE_SCHEMA.has(name)),
  };
}

/** docs/configuration.md. */
export function configurationReference(): string {
  const parts = [
    '# Configuration',
    '',
    '<!-- Written by `npm run config:docs` from lib/config/config-docs.ts and lib/config/config.ts; edit those, not this. -->',
    '',
    'Every setting is an environment variable, read once at start from the environment and then from a',
    '`.env` file in the working directory (the environment wins). Bad values stop the service at start with',
    "the variable's name (`Invalid configuration: AGENT_PORT: …`). `.env.example` lists the same settings.",
    'The CLI reads its environment only, never a `.env` (see [cli.md](cli.md)).',
  ];
  for (const group of SETTING_GROUPS) {
    parts.push('', `## ${group.title}`, '', '| variable | default | meaning |', '|---|---|---|');
    for (const [name, setting] of Object.entries(group.settings)) {
      parts.push(`| \`${name}\` | ${defaultOf(name, setting)} | ${setting.doc} |`);
    }
  }
  return `${parts.join('\n')}\n`;
}

/** .env.example: each group's settings commented out with their defaults, the model's first. */
export function envExample(): string {
  const plain = (text: string) => text.replace(/`/g, '');
  const lines = [
    '# Copy to .env and fill in. Real environment variables win over this file.',
    '# Written by `npm run config:docs` (lib/config/config-docs.ts); docs/configuration.md has the same settings.',
  ];
  for (const group of SETTING_GROUPS) {
    lines.push('', `# ── ${plain(group.title)}`);
    if (group.intro) lines.push(`# ${group.intro}`);
    for (const [name, setting] of Object.entries(group.settings)) {
      const value = defaultOf(name, setting);
      const shown = value.startsWith('`') ? plain(value) : '';
      lines.push(`# ${plain(setting.doc)}`);
      // The model's settings are the ones a new user fills in: shown uncommented.
      lines.push(
        group === SETTING_GROUPS[0] && name.startsWith('OPENAI') ? `${name}=` : `# ${name}=${shown}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

// The CLI's help: one page for all, and one per command (`toolshift help run`, `toolshift run --help`).

const ENVIRONMENT = `Environment (the shell's; a .env in the current directory is never read):
  AGENT_URL            the agent-server (default: where the daemon recorded it listens, else
                       http://127.0.0.1:$AGENT_PORT, port 8000)
  GATEWAY_URL          the mcp-gateway (default: where the daemon recorded it listens, else port 8080)
  AGENT_API_TOKEN      sent to the agent-server (default: generated, read from the daemon's credentials file)
  GATEWAY_ADMIN_TOKEN  sent to the gateway, the operator's token (default: generated, from the credentials file)
  TOOLSHIFT_DATA_DIR   where the daemon keeps credentials.json and addresses.json (default
                       ~/.local/share/toolshift)
  NO_COLOR             any value: no colour, even on a terminal
A token from the credentials file goes only to an address the daemon recorded beside it; for any other
URL give the token in the environment (GATEWAY_ADMIN_TOKEN=… toolshift toolsets).
`;

const EXIT_CODES = `Exit codes:
  0    completed (for other commands: done)
  1    the task failed, hit max_steps, timed out or was cancelled; or the server refused the request
  2    usage: an unknown command or flag, or a missing argument
  3    a service was unreachable, answered as another or refused the credentials; a stored token was withheld
  130  interrupted and detached: the task keeps running on the server
`;

/** Help for each command. */
export const COMMAND_HELP: Record<string, string> = {
  token: `toolshift token — print a credential the daemon made (or the environment sets)

Usage:
  toolshift token [role]

Roles: api (AGENT_API_TOKEN, the default), admin (GATEWAY_ADMIN_TOKEN), agent (GATEWAY_AGENT_TOKEN),
mcp (GATEWAY_MCP_TOKEN, for MCP clients of /mcp), viewer (VIEWER_TOKEN, read only), tool-server
(TOOL_SERVER_TOKEN), webhook (AGENT_WEBHOOK_SECRET), seal (GATEWAY_SEAL_KEY: people's own upstream
credentials are sealed with it; give every gateway replica the same one).

  curl -H "Authorization: Bearer $(toolshift token)" http://127.0.0.1:8000/agent/tasks

The daemon makes every token the environment does not set at its first start, in
$TOOLSHIFT_DATA_DIR/credentials.json (~/.local/share/toolshift by default), readable only by its user.
${EXIT_CODES}`,
  users: `toolshift users — the people who use this daemon, each with their own keys and limits

Usage:
  toolshift users [list]
  toolshift users add NAME [--email E] [--team T]... [limits]
  toolshift users remove NAME           their keys are refused from now on
  toolshift users limits NAME [limits]  change a user's limits

Limits (a whole number, or none for unlimited); a user's and each of their teams' all apply:
  --tasks-per-hour N  --tokens-per-day N (model tokens)  --tool-calls-per-minute N

Past a limit a request gets 429 with Retry-After naming it; a task's tool call waits for the next minute.
Give a user a key with toolshift keys create. Sends GATEWAY_ADMIN_TOKEN.
${EXIT_CODES}`,
  keys: `toolshift keys — API keys: each is a user's, with a role, shown once and kept only as a hash

Usage:
  toolshift keys [list] [--user NAME]
  toolshift keys create --user NAME --role ROLE [--expires 30d|12h|90m] [--label TEXT]
  toolshift keys revoke ID

Roles: viewer (reads), runner (runs tasks, uses the MCP face), approver (also decides approvals),
operator (everything, every user's work). A key works wherever the matching service token does:
  AGENT_API_TOKEN=<key> toolshift run "…"      curl -H "Authorization: Bearer <key>" …
A user sees only their own tasks and threads. Sends GATEWAY_ADMIN_TOKEN.
${EXIT_CODES}`,
  teams: `toolshift teams — teams of users, with limits their members share

Usage:
  toolshift teams [list]
  toolshift teams add NAME [limits]
  toolshift teams remove NAME
  toolshift teams join TEAM USER | leave TEAM USER
  toolshift teams limits TEAM [limits]   --tasks-per-hour N --tokens-per-day N --tool-calls-per-minute N
  toolshift teams disable|enable TEAM TOOLSET...   the team's ceiling: toolsets its members may not use
                                         (inside the operator's: a toolset disabled for all stays so)
  toolshift teams policy TEAM FILE|none  the team's policy overlay: rules in POLICY_FILE's YAML, on top of
                                         the operator's policy (a rule only makes it stricter: ask, deny)
Sends GATEWAY_ADMIN_TOKEN.
${EXIT_CODES}`,
  secrets: `toolshift secrets — your own values of a toolset's secrets (your API key at its server)

Usage:
  toolshift secrets [list]
  printf %s "$VALUE" | toolshift secrets set TOOLSET NAME
  toolshift secrets remove TOOLSET NAME

A toolset file names the secrets each person may set (user_secrets); your calls of its tools use yours
instead of the shared value. The value is read from stdin (never the command line), kept sealed, and never
shown again. Sends your key: AGENT_API_TOKEN=<key> toolshift secrets list
${EXIT_CODES}`,
  connect: `toolshift connect — connect your own account at a toolset's server (or drop it)

Usage:
  toolshift connect TOOLSET            print the console's page that connects it
  toolshift connect --revoke TOOLSET   drop your grant (revoked at the server when it can)

A toolset whose server takes each person's own OAuth account (backend.mcp.oauth) asks you to connect before your
calls of its tools; you consent in your browser, at the server's own page, and the gateway keeps your grant
sealed. For a toolset that takes your API key instead, the page says how to set it (toolshift secrets set).
--revoke sends your key: AGENT_API_TOKEN=<key> toolshift connect --revoke TOOLSET
${EXIT_CODES}`,
  run: `toolshift run — run a task and show what the agent does while it does it

Usage:
  toolshift run "<goal>" [options]
  toolshift run - [options]          read the goal from stdin
  toolshift run --prompt NAME [--arg key=value]...   a playbook prompt as the goal

Options:
  -s, --session ID          continue a session (its active toolsets carry over)
  --thread ID               continue a thread: the task sees its earlier turns
                            and acts in its session (toolshift threads lists them)
  --if-busy MODE            when the thread's last task still runs: enqueue (wait
                            for it, the default), reject, or interrupt (cancel it)
  --max-steps N             stop after N model calls (status max_steps)
  --max-duration S          stop after S seconds (status timed_out)
  --exposure MODE           auto: every tool when the catalog's definitions are
                            few (AUTO_EXPOSURE_TOKENS), else native;
                            native: the tools array follows the active toolsets;
                            dispatch: always [manage_toolsets, call_tool], so the
                            provider's prompt cache survives toolset changes;
                            code: the model runs scripts against its tools
                            (run_code), only their output comes back
                            (default: the server's TOOL_EXPOSURE)
  --prompt NAME             run a playbook prompt (GET /mcp/prompts lists them)
  --arg key=value           a playbook argument (repeat for each)
  --approve-all, --deny-all answer every approval the task asks for without asking
  --json                    print every event as a JSON line on stdout, then the result
  --quiet                   print only the answer (errors still go to stderr)
  --detach                  submit the task, print its id and leave it running
  --cancel-on-interrupt     Ctrl-C cancels the task on the server without asking

Progress and the summary go to stderr; stdout carries only the answer, so
  toolshift run "summarise notes.md" > summary.txt
keeps the summary clean. Every task is a turn of a thread (a new one unless
--thread); after it, a line says how to continue it. The first Ctrl-C asks whether to cancel the task or
detach from it (it keeps running on the server); a second Ctrl-C cancels it.

${EXIT_CODES}`,
  tasks: `toolshift tasks — recent tasks, one task, follow or cancel one

Usage:
  toolshift tasks [list] [--limit N] [--json]
  toolshift tasks show <task_id> [--json]
  toolshift tasks watch <task_id> [--json] [--quiet] [--cancel-on-interrupt]
  toolshift tasks cancel <task_id>

watch follows a running task's events as run does (a finished one is replayed),
and exits with the task's exit code.

${EXIT_CODES}`,
  chat: `toolshift chat — a conversation on a thread, a line a turn

Usage:
  toolshift chat [--thread ID] [--session ID] [--exposure MODE] [--approve-all | --deny-all]

Each line is a goal sent to the thread (a new thread from the first line unless --thread); the
answer streams as it comes, and approvals are asked as run asks them. Ctrl-C during a turn
cancels that turn and brings the prompt back; Ctrl-C on an empty line, Ctrl-D or /exit leave.

Commands at the prompt:
  /new        a new thread from the next line
  /thread     the thread's id, and how to continue it elsewhere
  /toolsets   the toolsets active in the thread's session
  /help       the commands
  /exit       leave

Piped (printf 'one\\ntwo\\n' | toolshift chat), each line is a turn and each answer goes to stdout.
A line longer than a goal may be (64 KiB) is refused, not sent.

${EXIT_CODES}`,
  threads: `toolshift threads — your conversations, one with its turns, deleting one

Usage:
  toolshift threads [list] [--limit N] [--json]
  toolshift threads show <thread_id> [--json]
  toolshift threads delete <thread_id>

show lists each turn: its goal, status, answer and task. delete removes the thread with its
tasks (refused while one of them runs). Continue one with toolshift chat --thread ID or
toolshift run --thread ID "<goal>".

${EXIT_CODES}`,
  toolsets: `toolshift toolsets — the toolset catalog and a session's active toolsets

Usage:
  toolshift toolsets [list] [--session ID] [--query WORDS] [--json]
  toolshift toolsets activate|deactivate <toolset_id>... [--session ID]
  toolshift toolsets enable|disable <toolset_id>...
  toolshift toolsets import <mcpServers.json> [--force] [--no-connect] [--allow-var NAME]...
  toolshift toolsets reload
  toolshift toolsets approve <toolset_id> [tool...]

Without --session, activate/deactivate act on the session named "default".
import refuses a \${VAR} the file already has (the gateway would fill it from its own environment)
unless each is named with --allow-var NAME; nothing is written then.
These commands talk to the gateway and send GATEWAY_ADMIN_TOKEN when it is set.

${EXIT_CODES}`,
  approvals: `toolshift approvals — what paused tasks wait for, and deciding it

Usage:
  toolshift approvals [list] [--json]
  toolshift approvals approve <task_id> <call_id> [--reason TEXT]
  toolshift approvals deny <task_id> <call_id> [--reason TEXT]

A task pauses when the operator's policy asks about a call or an activation; the
first decision wins (a second is told it came too late). Sends AGENT_API_TOKEN.

${EXIT_CODES}`,
  serve: `toolshift serve — start the daemon

Usage:
  toolshift serve [--data-dir DIR]            the three services in one process
  toolshift serve agent-server|mcp-gateway|tool-server   one service alone (one container each, say)
  toolshift serve agent-api|worker            the agent API alone, or a task worker alone: several of
                                              each on one PostgreSQL database (DATABASE_URL)

The daemon prints one line once it listens: where the agent API and the MCP endpoint are, and where its
data is. Ctrl-C (SIGINT) or SIGTERM stops it after the tasks in flight have recorded their state.

Options:
  --data-dir DIR   where the SQLite files, credentials.json, your toolsets and the default workspace live
                   (default: TOOLSHIFT_DATA_DIR, else the user's data directory, ~/.local/share/toolshift
                   on Linux); the shipped toolsets, policy and prompts are read from the installation

Every setting is an environment variable (or a line of .env in the working directory): see
docs/configuration.md. \`npm start\` in a checkout is \`toolshift serve\`.
`,
  console: `toolshift console — print a one-time login link to the web console

Usage:
  toolshift console [admin|api|viewer]

The link logs a browser in once, within 10 minutes, as the operator (admin, the default: everything), an
approver (api: runs tasks, decides approvals) or a viewer (reads only). The browser keeps an HttpOnly session
cookie, never the token. Logging in with a token on the console's login page works too.

${EXIT_CODES}`,
  audit: `toolshift audit — the gateway's audit log, newest first, a page at a time

Usage:
  toolshift audit [filters] [--limit N] [--cursor C] [--json]
  toolshift audit [filters] --jsonl > audit.jsonl     every matching row, as JSON lines

Filters (each exact): --session ID  --task ID  --since ISO  --until ISO  --actor WHO
  --kind call|activate|deactivate|enable|disable|manage|list|approve|approval|reload|policy|limit|read|default|grant|drop
  --toolset ID (its changes and the calls of its tools)  --tool NAME (its calls)  --outcome ok|refused

Each page ends with the command for the next one (--cursor). Sends GATEWAY_ADMIN_TOKEN.

${EXIT_CODES}`,
};

/** Every command, for usage errors and suggestions. */
export const COMMANDS = [
  'run',
  'tasks',
  'chat',
  'threads',
  'toolsets',
  'approvals',
  'audit',
  'users',
  'keys',
  'teams',
  'secrets',
  'connect',
  'console',
  'token',
  'serve',
  'help',
] as const;

/** The word of `candidates` nearest to what was typed (a prefix of two or more letters, or 2 edits away). */
export function nearest(typed: string, candidates: readonly string[]): string | undefined {
  const distance = (a: string, b: string) => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let diagonal = row[0];
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const above = row[j];
        row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
        diagonal = above;
      }
    }
    return row[b.length];
  };
  const scored = candidates.map((c) => ({
    c,
    d: c.startsWith(typed) && typed.length >= 2 ? 0 : distance(typed, c),
  }));
  const best = scored.sort((x, y) => x.d - y.d)[0];
  return best && best.d <= 2 ? best.c : undefined;
}

/** The command nearest to a mistyped one. */
export const nearestCommand = (typed: string) => nearest(typed, COMMANDS);

/** The overview printed by `toolshift --help`. */
export const HELP = `toolshift — run tasks and manage toolsets

Usage:
  toolshift serve [<service>] [--data-dir DIR]   start the daemon (all three services, or one)
  toolshift run "<goal>" | -          run a task with live progress; the answer goes to stdout
  toolshift chat [--thread ID]       a conversation: a line a turn, the answer streaming
  toolshift threads [list|show|delete] [<thread_id>]
  toolshift tasks [list|show|watch|cancel] [<task_id>]
  toolshift toolsets [list|activate|deactivate|enable|disable|import|reload|approve] ...
  toolshift approvals [list|approve|deny] ...   what paused tasks wait for, and deciding it
  toolshift audit [--session ID] [--task ID] [--since ISO]   the gateway's audit log
  toolshift console [admin|api|viewer]   a one-time login link to the web console
  toolshift token [api|admin|agent|mcp|viewer|tool-server|webhook]   print a credential (for curl and scripts; webhook: the signing secret)
  toolshift help <command>            options of one command (or: toolshift <command> --help)
  toolshift --version

Common options: --json (machine-readable output), -q/--quiet, -h/--help.

${EXIT_CODES}
${ENVIRONMENT}`;

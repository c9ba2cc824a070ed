import { codeTurns } from './code-script.ts';
import type { ScriptedCall, ScriptedTurn } from './mock-model.ts';
import type { Action, BenchTask, CodeAction } from './task-types.ts';

export type { Action, BenchTask } from './task-types.ts';

// The benchmark's twelve scripted multi-step tasks. Each is written once, as a model that manages its own
// toolsets would act: activate what the task needs (after a LIST with a query when it does not know which
// toolset), call tools, switch toolsets in the same reply as its last call to the old one, and deactivate
// with its last call. The same task then runs five ways (arms.ts): dynamic native, dynamic dispatch, all tools
// loaded (the toolset actions dropped, and with them the turns that held nothing else), goal-primed, and code
// mode (code-script.ts). The data-heavy tasks beside them are in data-tasks.ts.

const fs = 'file_system_tools';
const git = 'git_tools';
const db = 'database_tools';

/** The twelve tasks; the workspace they run on is made by workspace.ts, `pages` is the web server's origin. */
export function benchTasks(pages: string): BenchTask[] {
  return [
    {
      key: 't01-project-overview',
      goal: 'Give me an overview of the invoice-tool project in project/: what it does and how the code is laid out.',
      turns: [
        [{ activate: [fs] }],
        [{ tool: 'read_text_file', args: { path: 'project/README.md' } }],
        [{ tool: 'list_directory', args: { path: 'project/src' } }],
        [{ tool: 'read_text_file', args: { path: 'project/src/app.ts' } }],
        [{ tool: 'read_text_file', args: { path: 'project/src/orders.ts' } }],
        [{ tool: 'search_files', args: { path: 'project', pattern: '*.md' } }, { deactivate: [fs] }],
      ],
      answer:
        'invoice-tool turns a CSV export of orders into one PDF invoice per customer. src/app.ts groups the ' +
        'orders by customer and renders each invoice; src/orders.ts parses the CSV. README.md and CHANGELOG.md ' +
        'document usage and releases.',
    },
    {
      key: 't02-changelog-entry',
      goal: 'Add a changelog entry for version 1.4.0 saying that credit notes were added, above 1.3.0.',
      turns: [
        [{ activate: [fs] }],
        [{ tool: 'read_text_file', args: { path: 'project/CHANGELOG.md' } }],
        [
          {
            tool: 'edit_file',
            args: {
              path: 'project/CHANGELOG.md',
              edits: [
                {
                  old_text: '## 1.3.0',
                  new_text: '## 1.4.0\n- Credit notes for negative order lines.\n\n## 1.3.0',
                },
              ],
            },
          },
        ],
        [{ tool: 'read_text_file', args: { path: 'project/CHANGELOG.md', head: 8 } }, { deactivate: [fs] }],
      ],
      answer: 'CHANGELOG.md now starts with a 1.4.0 section: "Credit notes for negative order lines."',
    },
    {
      key: 't03-last-commit',
      goal: 'What changed in the last commit of the repository in project/?',
      turns: [
        [{ activate: [git] }],
        [{ tool: 'git_log', args: { repository: 'project', limit: 5 } }],
        [{ tool: 'git_show', args: { repository: 'project', ref: 'HEAD', stat_only: true } }],
        [{ tool: 'git_show', args: { repository: 'project', ref: 'HEAD' } }],
        [
          { tool: 'git_diff', args: { repository: 'project', from: 'HEAD~1', to: 'HEAD', stat_only: true } },
          { deactivate: [git] },
        ],
      ],
      answer:
        'The last commit, "Parse orders from the CSV export", added src/orders.ts with the Order type and parseOrders().',
    },
    {
      key: 't04-review-uncommitted',
      goal: 'Review the uncommitted changes in project/ and tell me whether they are safe to commit.',
      turns: [
        [{ activate: [git] }],
        [{ tool: 'git_status', args: { repository: 'project' } }],
        [{ tool: 'git_diff', args: { repository: 'project' } }, { deactivate: [git] }, { activate: [fs] }],
        [{ tool: 'read_text_file', args: { path: 'project/src/app.ts' } }, { deactivate: [fs] }],
      ],
      answer:
        'One change: app.ts strips carriage returns before parsing, so Windows exports work. Safe to commit.',
    },
    {
      key: 't05-orders-per-customer',
      goal: 'How many orders and how much revenue per customer are in the shop database?',
      turns: [
        [{ activate: [db] }],
        [{ tool: 'list_databases', args: {} }],
        [{ tool: 'list_tables', args: { path: 'shop.db' } }],
        [{ tool: 'describe_table', args: { path: 'shop.db', table: 'orders' } }],
        [{ tool: 'describe_table', args: { path: 'shop.db', table: 'customers' } }],
        [
          {
            tool: 'query',
            args: {
              path: 'shop.db',
              sql:
                'SELECT c.name, COUNT(*) AS orders, SUM(o.amount_cents) / 100.0 AS revenue FROM orders o ' +
                'JOIN customers c ON c.id = o.customer_id GROUP BY c.name ORDER BY revenue DESC',
            },
          },
          { deactivate: [db] },
        ],
      ],
      answer:
        'Each of the five customers has 8 orders; the revenue per customer is listed above, highest first.',
    },
    {
      key: 't06-remember-preferences',
      goal: 'Remember that Ann prefers tea and reviews invoices, and that Bob prefers coffee and reports to Ann.',
      turns: [
        [{ activate: ['memory'] }],
        [
          {
            tool: 'create_entities',
            args: {
              entities: [
                { name: 'Ann', entityType: 'person', observations: ['prefers tea'] },
                { name: 'Bob', entityType: 'person', observations: ['prefers coffee'] },
              ],
            },
          },
        ],
        [
          {
            tool: 'create_relations',
            args: { relations: [{ from: 'Bob', to: 'Ann', relationType: 'reports to' }] },
          },
        ],
        [
          {
            tool: 'add_observations',
            args: { observations: [{ entityName: 'Ann', contents: ['reviews invoices'] }] },
          },
        ],
        [{ tool: 'search_nodes', args: { query: 'tea' } }],
        [{ tool: 'read_graph', args: {} }, { deactivate: ['memory'] }],
      ],
      answer: 'Saved: Ann (prefers tea, reviews invoices), Bob (prefers coffee), and Bob reports to Ann.',
    },
    {
      key: 't07-recall-preference',
      goal: 'What does Ann like to drink? Check what you remember about her.',
      turns: [
        [{ list: 'remember what a person prefers' }],
        [{ activate: ['memory'] }],
        [{ tool: 'search_nodes', args: { query: 'Ann' } }],
        [{ tool: 'open_nodes', args: { names: ['Ann'] } }, { deactivate: ['memory'] }],
      ],
      answer: 'Ann prefers tea.',
    },
    {
      key: 't08-plan-release',
      goal: 'Think through a plan for releasing invoice-tool 1.4.0 step by step before answering.',
      turns: [
        [{ activate: ['sequential_thinking'] }],
        ...[
          'List what 1.4.0 contains: credit notes, semicolon CSV, embedded fonts.',
          'Credit notes need their own number series; check the renderer handles negative totals.',
          'Update the changelog and README usage for semicolon files.',
          'Tag v1.4.0 from main after the tests pass, then publish.',
          'Announce the release with the upgrade note: no configuration changes.',
        ].map((thought, i) => [
          {
            tool: 'sequentialthinking',
            args: { thought, thoughtNumber: i + 1, totalThoughts: 5, nextThoughtNeeded: i < 4 },
          } as Action,
          ...(i === 4 ? [{ deactivate: ['sequential_thinking'] } as Action] : []),
        ]),
      ],
      answer:
        'Plan: verify credit notes and negative totals, update changelog and README, tag v1.4.0 after tests, announce.',
    },
    {
      key: 't09-reference-server',
      goal: 'Use the MCP reference server: add 19 and 23, echo a greeting, and fetch the weather for Chicago.',
      turns: [
        [{ activate: ['mcp_reference'] }],
        [{ tool: 'get-sum', args: { a: 19, b: 23 } }],
        [{ tool: 'echo', args: { message: 'Hello from the benchmark' } }],
        [{ tool: 'get-annotated-message', args: { messageType: 'success' } }],
        [
          { tool: 'get-structured-content', args: { location: 'Chicago' } },
          { deactivate: ['mcp_reference'] },
        ],
      ],
      answer: '19 + 23 = 42; the echo came back unchanged; Chicago’s structured weather is shown above.',
    },
    {
      key: 't10-release-notes-online',
      goal: `Read the release notes at ${pages}/release-notes and the VAT table at ${pages}/vat-rates and summarise both.`,
      turns: [
        [{ activate: ['web_tools'] }],
        [{ tool: 'fetch_url', args: { url: `${pages}/release-notes` } }],
        [{ tool: 'fetch_url', args: { url: `${pages}/vat-rates` } }, { deactivate: ['web_tools'] }],
      ],
      answer:
        '1.4.0 adds credit notes, semicolon CSVs and embedded fonts; standard VAT is 19–21% in the listed countries.',
    },
    {
      key: 't11-revenue-report',
      goal: 'Write a short revenue report from the shop database to reports/revenue.md.',
      turns: [
        [{ activate: [db] }],
        [
          {
            tool: 'query',
            args: {
              path: 'shop.db',
              sql: 'SELECT COUNT(*) AS orders, SUM(amount_cents) / 100.0 AS total FROM orders',
            },
          },
        ],
        [
          {
            tool: 'query',
            args: {
              path: 'shop.db',
              sql: 'SELECT c.country, SUM(o.amount_cents) / 100.0 AS revenue FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.country',
            },
          },
          { deactivate: [db] },
          { activate: [fs] },
        ],
        [
          {
            tool: 'write_file',
            args: {
              path: 'reports/revenue.md',
              content: '# Revenue\n\n40 orders in all. Revenue by country: DE first, then FR, NL and ES.\n',
            },
          },
        ],
        [{ tool: 'read_text_file', args: { path: 'reports/revenue.md' } }, { deactivate: [fs] }],
      ],
      answer: 'reports/revenue.md holds the totals and the revenue by country.',
    },
    {
      key: 't12-history-to-memory',
      goal: 'Look at the commit history of project/ and remember who wrote the parser.',
      turns: [
        [{ list: 'commit history of a repository' }],
        [{ activate: [git] }],
        [{ tool: 'git_log', args: { repository: 'project', limit: 10 } }],
        [
          { tool: 'git_branches', args: { repository: 'project' } },
          { deactivate: [git] },
          { activate: ['memory'] },
        ],
        [
          {
            tool: 'create_entities',
            args: {
              entities: [
                { name: 'Ann Example', entityType: 'person', observations: ['wrote the CSV order parser'] },
              ],
            },
          },
          { deactivate: ['memory'] },
        ],
      ],
      answer:
        'Ann Example wrote the parser (commit "Parse orders from the CSV export"); I saved that to memory.',
    },
  ];
}

/**
 * The ways a task runs: dynamic native, dynamic dispatch, all tools loaded, dynamic native with goal-primed
 * toolsets (the agent activates the toolset discovery is certain of before the first model call), and code
 * mode (the model reaches tools from scripts, run_code).
 */
export type Arm = 'native' | 'dispatch' | 'all-loaded' | 'primed' | 'auto' | 'code';

/** The arms, in the order they are reported. */
export const ARMS: readonly Arm[] = ['native', 'dispatch', 'all-loaded', 'primed', 'auto', 'code'];

/** Every toolset a task activates at some point: what it needs. */
export function neededToolsets(task: BenchTask): Set<string> {
  return new Set(task.turns.flat().flatMap((a) => ('activate' in a ? a.activate : [])));
}

/**
 * A task as a model acts when it finds toolsets already active at its first turn (primed): the LIST and ACTIVATE
 * of its first reply that the active toolsets make needless are dropped (and the reply with them, when nothing
 * is left), and an active toolset the task does not need is deactivated in its first reply.
 */
export function primedTask(task: BenchTask, active: ReadonlySet<string>): BenchTask {
  const needed = neededToolsets(task);
  const [first, ...rest] = task.turns;
  const wanted = first.flatMap((a) => ('activate' in a ? a.activate : []));
  const satisfied = wanted.length > 0 && wanted.every((id) => active.has(id));
  const kept = first.filter((a) => {
    if ('activate' in a) return !a.activate.every((id) => active.has(id));
    if ('list' in a) return !satisfied;
    return true;
  });
  const unneeded = [...active].filter((id) => !needed.has(id));
  const firstTurn: Action[] = [...(unneeded.length > 0 ? [{ deactivate: unneeded }] : []), ...kept];
  // A first reply left empty does not happen: the model goes straight to the task's next reply.
  const turns = firstTurn.length === 0 ? rest : [firstTurn, ...rest];
  return { ...task, turns };
}

/**
 * A task as a model acts when it may call any tool the system prompt names (activation without a turn): it calls
 * the tool instead of a LIST and an ACTIVATE before it, and still deactivates — with its last call to a toolset,
 * or, for a toolset it found active and does not need, with its first call. A reply left with nothing to do is
 * not made.
 */
export function directTask(task: BenchTask): BenchTask {
  const turns: Action[][] = [];
  let carried: Action[] = [];
  for (const actions of task.turns) {
    const kept = [...carried, ...actions.filter((a) => !('activate' in a) && !('list' in a))];
    carried = [];
    if (kept.every((a) => 'deactivate' in a)) carried = kept;
    else turns.push(kept);
  }
  if (carried.length > 0) turns.push(carried);
  return { ...task, turns };
}

/** A toolset action as a manage_toolsets call's arguments. */
function manageArgs(a: Exclude<CodeAction, { run: string }>): Record<string, unknown> {
  if ('list' in a) return { action: 'LIST', toolset_ids: [], query: a.list };
  if ('activate' in a) return { action: 'ACTIVATE', toolset_ids: a.activate };
  return { action: 'DEACTIVATE', toolset_ids: a.deactivate };
}

/** A task's replies for one arm, as tool calls (call ids are the same in every arm). */
export function scriptFor(task: BenchTask, arm: Arm): ScriptedTurn[] {
  const replies: (Action | CodeAction)[][] = arm === 'code' ? codeTurns(task) : task.turns;
  const turns: ScriptedTurn[] = [];
  replies.forEach((actions, t) => {
    const calls: ScriptedCall[] = [];
    actions.forEach((a, i) => {
      const id = `call_${task.key.slice(0, 3)}_${t}_${i}`;
      if ('run' in a) calls.push({ id, name: 'run_code', arguments: { code: a.run } });
      else if ('tool' in a) {
        calls.push(
          arm === 'dispatch'
            ? { id, name: 'call_tool', arguments: { name: a.tool, arguments: a.args } }
            : { id, name: a.tool, arguments: a.args },
        );
      } else if (arm !== 'all-loaded') calls.push({ id, name: 'manage_toolsets', arguments: manageArgs(a) });
    });
    if (calls.length > 0) turns.push({ calls });
  });
  turns.push({ answer: task.answer });
  return turns;
}

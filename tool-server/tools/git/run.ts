import { ToolError } from '../../kit/errors.ts';

// What git is started with (spawn.ts starts it, the only place that does). Everything a repository (or
// the caller) could use to run a program is switched off here: no shell (an argv), an allow-list of subcommands and flags, user-derived values
// only after --end-of-options (revisions) or -- (literal pathspecs), config that runs programs or opens
// transports overridden on every call, and a child environment built from an allow-list, so no GIT_*
// variable, pager, editor or askpass of the service's own environment reaches git.

/** What git_tools need from the service; absent fields take DEFAULT_GIT_SETTINGS. */
export interface GitSettings {
  /** Per git invocation; the child is killed when it runs longer. */
  timeoutMs?: number;
  /** Cap on one invocation's output; more is cut with a truncation marker. */
  maxOutputBytes?: number;
  /** The environment the child's is picked from (only CHILD_ENV_KEYS); defaults to process.env. */
  env?: Record<string, string | undefined>;
}

/** The limits used when the service does not configure them. */
export const DEFAULT_GIT_SETTINGS = { timeoutMs: 15_000, maxOutputBytes: 256 * 1024 } as const;

/** The variables a git child inherits; everything else (every GIT_*, PAGER, EDITOR, SSH_ASKPASS …) is dropped. */
export const CHILD_ENV_KEYS: readonly string[] = [
  'PATH',
  'HOME',
  'XDG_CONFIG_HOME',
  'USER',
  'LOGNAME',
  'TMPDIR',
];

/**
 * Config that would start a program, passed as `-c` on every call (command-line config beats the repo's).
 * Filter drivers and per-protocol allows are named by the repository itself; repo.ts finds those and
 * overrides them through GIT_CONFIG_KEY_n, which unlike `-c` cannot be split by an `=` in a driver name.
 */
export const NEUTRALISING_CONFIG: readonly (readonly [string, string])[] = [
  ['core.fsmonitor', 'false'], // a hook program run by status/diff
  ['core.hooksPath', '/dev/null'], // post-index-change and every other hook
  ['core.pager', 'cat'], // also --no-pager below
  ['diff.external', ''], // also --no-ext-diff on every diff
  ['diff.autoRefreshIndex', 'false'], // `git diff` writes a refreshed index back even under --no-optional-locks
  ['log.showSignature', 'false'], // would run gpg.program / gpg.ssh.program
  ['protocol.allow', 'never'], // a lazy fetch (partial clone) would run ssh, upload-pack or ext:: commands
  ['color.ui', 'never'],
  ['core.quotePath', 'false'],
];

/** The subcommands git_tools run and the flags each may carry (as `--flag` or `--flag=value`). */
const ALLOWED_FLAGS = {
  'rev-parse': [
    '--verify',
    '--quiet',
    '--path-format',
    '--absolute-git-dir',
    '--git-common-dir',
    '--is-bare-repository',
    '--is-inside-work-tree',
    '--show-toplevel',
  ],
  status: ['--porcelain', '--branch', '-z', '--untracked-files', '--ignore-submodules'],
  diff: [
    '--raw',
    '--numstat',
    '--patch',
    '-z',
    '-M',
    '--cached',
    '--no-color',
    '--no-ext-diff',
    '--no-textconv',
    '--ignore-submodules',
    '--unified',
  ],
  log: [
    '--format',
    '-z',
    '--max-count',
    '--skip',
    '--author',
    '--grep',
    '--since',
    '--until',
    '--regexp-ignore-case',
    '--no-decorate',
    '--no-color',
    '--no-ext-diff',
    '--no-textconv',
    '--no-patch',
  ],
  'for-each-ref': ['--format', '--sort', '--count'],
  'symbolic-ref': ['--quiet', '--short'],
  config: ['--null', '--name-only', '--get-regexp'],
} as const satisfies Record<string, readonly string[]>;

/** A subcommand on the allow-list. */
export type GitSubcommand = keyof typeof ALLOWED_FLAGS;

/** One git invocation as the tools build it: allow-listed flags, then revisions, then pathspecs. */
export interface GitCommand {
  sub: GitSubcommand;
  flags?: readonly string[];
  /** Placed after --end-of-options, so none of them can be read as an option. */
  revs?: readonly string[];
  /** Placed after --; literal (no pathspec magic), relative to the work tree. */
  paths?: readonly string[];
}

/** Where git runs and which repository it is pinned to. */
export interface GitTarget {
  cwd: string;
  /** --git-dir / --work-tree: set once a repository is opened, so repo config cannot move them. */
  gitDir?: string;
  workTree?: string;
  /** GIT_COMMON_DIR: the common directory of a linked worktree, pinned like the git directory. */
  commonDir?: string;
  /** GIT_IMPLICIT_WORK_TREE=0: no work tree unless given, for commands that read only the repository. */
  noWorkTree?: boolean;
  /** Open directories the child gets as descriptors 3, 4, …, so it can name them /proc/self/fd/3 … */
  fds?: readonly number[];
  /** GIT_CEILING_DIRECTORIES for discovery: repositories above the allowed directories are not found. */
  ceiling?: string;
  /** Overrides of config keys the repository names (filter drivers, protocols). */
  config?: readonly (readonly [string, string])[];
}

/** Output of a successful (or capped) run; `truncated` means the cap cut `stdout` and git was stopped. */
export interface GitOutput {
  stdout: string;
  truncated: boolean;
}

/** git ran and failed; callers that expect a failure (an unknown ref) read `exitCode` and `stderr`. */
export class GitFailure extends ToolError {
  readonly exitCode: number | null;
  readonly stderr: string;

  constructor(message: string, exitCode: number | null, stderr: string) {
    super(message);
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

/** The effective limits of a call. */
export function gitLimits(settings: GitSettings | undefined): { timeoutMs: number; maxOutputBytes: number } {
  return {
    timeoutMs: settings?.timeoutMs ?? DEFAULT_GIT_SETTINGS.timeoutMs,
    maxOutputBytes: settings?.maxOutputBytes ?? DEFAULT_GIT_SETTINGS.maxOutputBytes,
  };
}

/** The argv after `git`; throws (a programming error, not a tool failure) on a flag not on the allow-list. */
export function gitArgv(target: GitTarget, cmd: GitCommand): string[] {
  const allowed: readonly string[] = ALLOWED_FLAGS[cmd.sub];
  if (!allowed) throw new Error(`git ${String(cmd.sub)} is not an allowed subcommand`);
  for (const flag of cmd.flags ?? []) {
    const name = flag.includes('=') ? flag.slice(0, flag.indexOf('=')) : flag;
    if (!allowed.includes(name)) throw new Error(`git ${cmd.sub}: flag ${flag} is not on the allow-list`);
  }
  const argv = ['--no-pager', '--no-optional-locks', '--literal-pathspecs'];
  for (const [key, value] of NEUTRALISING_CONFIG) argv.push('-c', `${key}=${value}`);
  if (target.gitDir) argv.push(`--git-dir=${target.gitDir}`);
  if (target.workTree) argv.push(`--work-tree=${target.workTree}`);
  argv.push(cmd.sub, ...(cmd.flags ?? []));
  if (cmd.revs) argv.push('--end-of-options', ...cmd.revs);
  if (cmd.paths) argv.push('--', ...cmd.paths);
  return argv;
}

/** The child's environment: allow-listed variables plus the settings that keep git quiet and offline. */
export function gitEnv(settings: GitSettings | undefined, target: GitTarget): Record<string, string> {
  const base = settings?.env ?? process.env;
  const env: Record<string, string> = {
    LC_ALL: 'C',
    LANG: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_NO_LAZY_FETCH: '1',
    GIT_PROTOCOL_FROM_USER: '0',
  };
  for (const key of CHILD_ENV_KEYS) {
    const value = base[key];
    if (value !== undefined) env[key] = value;
  }
  if (target.ceiling) env.GIT_CEILING_DIRECTORIES = target.ceiling;
  if (target.commonDir) env.GIT_COMMON_DIR = target.commonDir;
  if (target.noWorkTree) env.GIT_IMPLICIT_WORK_TREE = '0';
  const config = target.config ?? [];
  if (config.length > 0) {
    env.GIT_CONFIG_COUNT = String(config.length);
    config.forEach(([key, value], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = key;
      env[`GIT_CONFIG_VALUE_${i}`] = value;
    });
  }
  return env;
}

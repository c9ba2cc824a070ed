// Parsers for git's machine formats (porcelain v2, --raw/--numstat with -z, our own log and ref
// formats): NUL- and unit-separated so any file name or message survives. A capped (truncated) output
// loses its last, partial record rather than reporting half of one. What they return is declared as schemas:
// the tools' output schemas are made of them.

import { z } from 'zod';

const CHANGE: Record<string, string> = {
  M: 'modified',
  T: 'type_changed',
  A: 'added',
  D: 'deleted',
  R: 'renamed',
  C: 'copied',
  U: 'unmerged',
  X: 'unknown',
};

const CONFLICT: Record<string, string> = {
  DD: 'both_deleted',
  AU: 'added_by_us',
  UD: 'deleted_by_them',
  UA: 'added_by_them',
  DU: 'deleted_by_us',
  AA: 'both_added',
  UU: 'both_modified',
};

/** One changed path in git_status. */
const StatusEntry = z.object({
  path: z.string(),
  status: z
    .string()
    .describe('added, modified, deleted, renamed, copied, type_changed; a conflict: both_modified …'),
  orig_path: z.string().optional().describe('Where a renamed or copied file came from'),
});

/** git_status's result before the repository fields are added. */
export const ParsedStatus = z.object({
  branch: z.object({
    head: z.string().nullable().describe('The branch; null when HEAD is detached'),
    detached: z.boolean(),
    oid: z.string().nullable().describe('The HEAD commit; null before the first commit'),
    upstream: z.string().nullable(),
    ahead: z.number().nullable(),
    behind: z.number().nullable(),
  }),
  staged: z.array(StatusEntry),
  unstaged: z.array(StatusEntry),
  untracked: z.array(z.string()),
  conflicted: z.array(StatusEntry),
});
export type ParsedStatus = z.infer<typeof ParsedStatus>;

/** `line` split into `n` space-separated fields and the rest (a path may hold spaces). */
function fields(line: string, n: number): { parts: string[]; rest: string } {
  const parts: string[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    const next = line.indexOf(' ', at);
    if (next === -1) return { parts, rest: '' };
    parts.push(line.slice(at, next));
    at = next + 1;
  }
  return { parts, rest: line.slice(at) };
}

/** Parses `git status --porcelain=v2 --branch -z`. */
export function parseStatus(stdout: string, truncated: boolean): ParsedStatus {
  const tokens = stdout.split('\0');
  if (truncated || tokens.at(-1) === '') tokens.pop();
  const out: ParsedStatus = {
    branch: { head: null, detached: false, oid: null, upstream: null, ahead: null, behind: null },
    staged: [],
    unstaged: [],
    untracked: [],
    conflicted: [],
  };
  const add = (xy: string, p: string, orig?: string) => {
    const [x, y] = xy;
    if (x !== '.') out.staged.push({ path: p, status: CHANGE[x] ?? x, ...(orig ? { orig_path: orig } : {}) });
    if (y !== '.') out.unstaged.push({ path: p, status: CHANGE[y] ?? y });
  };
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (t.startsWith('# ')) {
      const [, key, ...value] = t.split(' ');
      const v = value.join(' ');
      if (key === 'branch.oid') out.branch.oid = v === '(initial)' ? null : v;
      if (key === 'branch.head') {
        out.branch.detached = v === '(detached)';
        out.branch.head = out.branch.detached ? null : v;
      }
      if (key === 'branch.upstream') out.branch.upstream = v;
      const ab = key === 'branch.ab' ? /^\+(\d+) -(\d+)$/.exec(v) : null;
      if (ab) [out.branch.ahead, out.branch.behind] = [Number(ab[1]), Number(ab[2])];
    } else if (t.startsWith('1 ')) {
      const { parts, rest } = fields(t, 8);
      add(parts[1], rest);
    } else if (t.startsWith('2 ')) {
      if (i + 1 >= tokens.length) break; // its original path was cut off
      const { parts, rest } = fields(t, 9);
      add(parts[1], rest, tokens[++i]);
    } else if (t.startsWith('u ')) {
      const { parts, rest } = fields(t, 10);
      out.conflicted.push({ path: rest, status: CONFLICT[parts[1]] ?? parts[1] });
    } else if (t.startsWith('? ')) {
      out.untracked.push(t.slice(2));
    }
  }
  return out;
}

/** One file of a diff: what happened to it and its line counts (null for binary files). */
export const DiffFile = z.object({
  path: z.string(),
  old_path: z.string().optional().describe('Where a renamed or copied file came from'),
  status: z.string(),
  additions: z.number().nullable().describe('null for a binary file'),
  deletions: z.number().nullable().describe('null for a binary file'),
  binary: z.boolean(),
});
export type DiffFile = z.infer<typeof DiffFile>;

/** Parses `--raw --numstat -z` output (raw records first, then numstat ones in the same order). */
export function parseDiffFiles(stdout: string, truncated: boolean): DiffFile[] {
  const tokens = stdout.split('\0');
  if (truncated || tokens.at(-1) === '') tokens.pop();
  const files: DiffFile[] = [];
  let i = 0;
  while (i < tokens.length && tokens[i].startsWith(':')) {
    const letter = tokens[i].split(' ')[4]?.[0] ?? 'X';
    const twoPaths = letter === 'R' || letter === 'C';
    if (i + (twoPaths ? 2 : 1) >= tokens.length) break;
    const [first, second] = [tokens[i + 1], tokens[i + 2]];
    files.push({
      path: twoPaths ? second : first,
      ...(twoPaths ? { old_path: first } : {}),
      status: CHANGE[letter] ?? letter,
      additions: null,
      deletions: null,
      binary: false,
    });
    i += twoPaths ? 3 : 2;
  }
  for (const file of files) {
    const m = /^(\d+|-)\t(\d+|-)\t(.*)$/s.exec(tokens[i] ?? '');
    if (!m) break;
    i += m[3] === '' ? 3 : 1; // a rename's numstat names both paths in the next two tokens
    file.binary = m[1] === '-';
    file.additions = file.binary ? null : Number(m[1]);
    file.deletions = file.binary ? null : Number(m[2]);
  }
  return files;
}

/** A diff's `totals`. */
export const DiffTotals = z.object({ files: z.number(), additions: z.number(), deletions: z.number() });

/** Sums of a file list, for a diff's `totals`. */
export function diffTotals(files: readonly DiffFile[]): z.infer<typeof DiffTotals> {
  return {
    files: files.length,
    additions: files.reduce((n, f) => n + (f.additions ?? 0), 0),
    deletions: files.reduce((n, f) => n + (f.deletions ?? 0), 0),
  };
}

/** The log format every commit is read with: unit-separated fields, body last. */
export const LOG_FORMAT = '--format=%H%x1f%h%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%cn%x1f%ce%x1f%cI%x1f%s%x1f%b';

const Person = z.object({ name: z.string(), email: z.string(), date: z.string().describe('ISO 8601') });

/** One commit's metadata as git_log and git_show return it. */
export const CommitInfo = z.object({
  sha: z.string(),
  short_sha: z.string(),
  parents: z.array(z.string()),
  author: Person,
  committer: Person,
  subject: z.string(),
  body: z.string(),
});
export type CommitInfo = z.infer<typeof CommitInfo>;

/** Parses `git log -z` output in LOG_FORMAT; a partial last record (capped output) is dropped. */
export function parseLog(stdout: string, truncated: boolean): CommitInfo[] {
  const records = stdout.split('\0');
  if (truncated || records.at(-1)?.trim() === '') records.pop();
  return records.map((record) => {
    const f = record.replace(/^\n/, '').split('\x1f');
    return {
      sha: f[0],
      short_sha: f[1],
      parents: f[2] === '' ? [] : f[2].split(' '),
      author: { name: f[3], email: f[4], date: f[5] },
      committer: { name: f[6], email: f[7], date: f[8] },
      subject: f[9],
      body: f.slice(10).join('\x1f').trim(),
    };
  });
}

/** The for-each-ref format git_branches reads: unit-separated fields, records ended by \x1e. */
export const REF_FORMAT =
  '--format=%(refname)%1f%(objectname)%1f%(HEAD)%1f%(upstream:short)%1f%(upstream:track,nobracket)%1f' +
  '%(symref)%1f%(committerdate:iso-strict)%1f%(contents:subject)%1e';

/** One ref as for-each-ref reported it. */
export interface RefInfo {
  refname: string;
  sha: string;
  current: boolean;
  upstream: string | null;
  ahead: number | null;
  behind: number | null;
  upstream_gone: boolean;
  symref: string | null;
  date: string;
  subject: string;
}

/** Parses for-each-ref output in REF_FORMAT. */
export function parseRefs(stdout: string, truncated: boolean): RefInfo[] {
  const records = stdout.split('\x1e\n');
  if (truncated || records.at(-1) === '') records.pop();
  return records.map((record) => {
    const f = record.split('\x1f');
    const track = f[4] ?? '';
    const ahead = /ahead (\d+)/.exec(track);
    const behind = /behind (\d+)/.exec(track);
    return {
      refname: f[0],
      sha: f[1],
      current: f[2] === '*',
      upstream: f[3] || null,
      ahead: f[3] ? Number(ahead?.[1] ?? 0) : null,
      behind: f[3] ? Number(behind?.[1] ?? 0) : null,
      upstream_gone: track === 'gone',
      symref: f[5] || null,
      date: f[6],
      subject: f.slice(7).join('\x1f'),
    };
  });
}

/** Text cut to `max` characters with a marker saying how much is missing. */
export function capText(text: string, max: number): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  return {
    text: `${text.slice(0, max)}\n[truncated: showed ${max} of ${text.length} characters]`,
    truncated: true,
  };
}

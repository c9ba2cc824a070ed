import type { Dirent } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { defineTool, READ_ONLY } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { EntryType, entryType, fsMessage, globMatcher, LIMITS, relJoin } from './common.ts';
import { listChecked, readableDirectory } from './dirs.ts';

// The tools that walk a directory tree. Walks never follow symlinks (a link is reported as type
// "symlink" and not entered), are capped, and say so with `truncated` rather than dropping entries silently.
// Each directory is read through a descriptor verified to be the directory the walk reached (tool-server/guards/paths/fd-path.ts),
// so one swapped for an outward symlink meanwhile is reported as an error, not listed.

/**
 * Globs match paths relative to the walk's start, so an absolute one would silently match nothing: one that
 * starts with the start directory (as resolved, or as the model wrote it) is made relative, any other
 * absolute one is refused.
 */
function relativeGlob(pattern: string, dirs: string[], field: string): string {
  if (!path.isAbsolute(pattern)) return pattern;
  for (const dir of dirs) {
    const prefix = dir.endsWith(path.sep) ? dir : `${dir}${path.sep}`;
    if (pattern.startsWith(prefix) && pattern.length > prefix.length) return pattern.slice(prefix.length);
  }
  throw new ToolError(
    `The ${field} ${JSON.stringify(pattern)} is absolute and not under ${dirs[0]}; patterns are relative to ` +
      '`path` (e.g. "src/**/*.ts"), so give the directory to search as `path` instead',
  );
}

/** A node of directory_tree's answer. */
const TreeNode = z
  .object({
    name: z.string(),
    type: EntryType,
    get children() {
      return z.array(TreeNode).optional().describe("A directory's entries, when they were listed");
    },
    depth_limited: z
      .literal(true)
      .optional()
      .describe('A directory below max_depth: its entries were not listed'),
    truncated: z
      .literal(true)
      .optional()
      .describe("The node cap was reached before all of this directory's entries were listed"),
    error: z.string().optional().describe('Why the directory could not be listed'),
  })
  .meta({ id: 'TreeNode' });
type TreeNode = z.infer<typeof TreeNode>;

/** A recursive view of a directory as nested JSON, breadth-first so a capped tree stays balanced. */
export const directoryTree = defineTool({
  name: 'directory_tree',
  description:
    'Show a directory recursively as nested JSON: {path, tree: {name, type, children: [...]}, node_count, ' +
    `truncated}. Symlinks are shown, not followed. At most ${LIMITS.treeNodes} nodes; directories below ` +
    'max_depth are marked depth_limited. exclude_patterns are globs relative to `path`; a pattern without "/" ' +
    'matches names at any depth (e.g. "node_modules", "*.log").',
  input: z.object({
    path: z.string().describe('Directory to show: absolute, or relative to the first allowed directory'),
    exclude_patterns: z
      .array(z.string())
      .optional()
      .describe('Globs to leave out, e.g. ["node_modules", ".git", "dist/**"]'),
    max_depth: z
      .number()
      .int()
      .min(1)
      .max(100)
      .optional()
      .describe('Levels below `path` to show (default 10)'),
  }),
  output: z.object({
    path: z.string(),
    tree: TreeNode,
    node_count: z.number(),
    truncated: z.boolean(),
    max_depth: z.number(),
  }),
  annotations: { title: 'Directory tree', ...READ_ONLY },
  async execute(args, ctx) {
    const real = await readableDirectory(ctx, args.path);
    const excluded = globMatcher(args.exclude_patterns ?? []);
    const maxDepth = args.max_depth ?? 10;
    const tree: TreeNode = { name: path.basename(real) || real, type: 'directory', children: [] };
    const queue = [{ node: tree, dir: real, rel: '', depth: 0 }];
    let nodes = 1;
    let truncated = false;
    let next = 0;
    for (; next < queue.length && !truncated; next++) {
      const { node, dir, rel, depth } = queue[next];
      if (depth >= maxDepth) {
        delete node.children;
        node.depth_limited = true;
        continue;
      }
      let entries: Dirent[];
      try {
        entries = await listChecked(ctx, dir);
      } catch (err) {
        delete node.children;
        node.error = fsMessage(err, dir);
        continue;
      }
      for (const entry of entries) {
        const childRel = relJoin(rel, entry.name);
        if (excluded(childRel)) continue;
        if (nodes >= LIMITS.treeNodes) {
          truncated = true;
          node.truncated = true;
          break;
        }
        const child: TreeNode = { name: entry.name, type: entryType(entry) };
        if (child.type === 'directory') {
          child.children = [];
          queue.push({ node: child, dir: path.join(dir, entry.name), rel: childRel, depth: depth + 1 });
        }
        node.children?.push(child);
        nodes++;
      }
    }
    // Directories queued but never read must not look empty.
    for (const { node } of queue.slice(next)) {
      delete node.children;
      node.truncated = true;
    }
    return { path: real, tree, node_count: nodes, truncated, max_depth: maxDepth };
  },
});

/** Finds files and directories by glob under a directory, so the model need not walk the tree itself. */
export const searchFiles = defineTool({
  name: 'search_files',
  description:
    'Find files and directories under `path` whose path matches a glob. A pattern without "/" matches names at ' +
    'any depth ("*.ts", "README*"); a pattern with "/" matches the path relative to `path` ("src/**/*.test.ts"). ' +
    'Symlinks are reported, not followed. Patterns are relative to `path`; an absolute pattern is accepted only ' +
    'if it starts with `path`. Returns {path, pattern, matches: [{path (relative to `path`), type}], ' +
    'match_count, truncated}.',
  input: z.object({
    path: z.string().describe('Directory to search: absolute, or relative to the first allowed directory'),
    pattern: z.string().min(1).describe('Glob to match, e.g. "*.ts" or "src/**/index.*"'),
    exclude_patterns: z
      .array(z.string())
      .optional()
      .describe('Globs to skip (a skipped directory is not entered), e.g. ["node_modules", ".git"]'),
    max_results: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .optional()
      .describe('Most matches to return (default 200)'),
  }),
  output: z.object({
    path: z.string(),
    pattern: z.string().describe('The glob as matched, relative to `path`'),
    matches: z.array(
      z.object({ path: z.string().describe('Relative to `path`, "/"-separated'), type: EntryType }),
    ),
    match_count: z.number(),
    truncated: z.boolean(),
    note: z.string().optional().describe('Why the search stopped early'),
    errors: z
      .array(z.object({ path: z.string(), error: z.string() }))
      .optional()
      .describe('Directories that could not be read (at most 50)'),
  }),
  annotations: { title: 'Search files', ...READ_ONLY },
  async execute(args, ctx) {
    const real = await readableDirectory(ctx, args.path);
    const starts = [real, ctx.paths.absolute(args.path)];
    const pattern = relativeGlob(args.pattern, starts, 'pattern');
    const matches = globMatcher([pattern]);
    const excluded = globMatcher(
      (args.exclude_patterns ?? []).map((p) => relativeGlob(p, starts, 'exclude pattern')),
    );
    const maxResults = args.max_results ?? 200;
    const found: { path: string; type: EntryType }[] = [];
    const errors: { path: string; error: string }[] = [];
    let visited = 0;
    let truncated = false;

    // Depth-first with sorted entries, so results come out in path order.
    const visit = async (dir: string, rel: string): Promise<void> => {
      let entries: Dirent[];
      try {
        entries = await listChecked(ctx, dir);
      } catch (err) {
        if (errors.length < 50) errors.push({ path: rel === '' ? '.' : rel, error: fsMessage(err, dir) });
        return;
      }
      for (const entry of entries) {
        if (truncated) return;
        const childRel = relJoin(rel, entry.name);
        if (excluded(childRel)) continue;
        if (++visited > LIMITS.searchVisits) {
          truncated = true;
          return;
        }
        const type = entryType(entry);
        if (matches(childRel)) {
          if (found.length >= maxResults) {
            truncated = true;
            return;
          }
          found.push({ path: childRel, type });
        }
        if (type === 'directory') await visit(path.join(dir, entry.name), childRel);
      }
    };
    await visit(real, '');
    return {
      path: real,
      pattern,
      matches: found,
      match_count: found.length,
      truncated,
      ...(visited > LIMITS.searchVisits
        ? { note: `stopped after visiting ${LIMITS.searchVisits} entries` }
        : {}),
      ...(errors.length > 0 ? { errors } : {}),
    };
  },
});

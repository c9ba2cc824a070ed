import { z } from 'zod';
import { defineTool, READ_ONLY, type ToolContext } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { assertFilePath, EntryType, entryType, fsMessage, IsoTime, iso, onPath } from './common.ts';
import { type ReadOptions, readText, TextRead } from './text.ts';

// The tools that read files: whole, head or tail of one file, several at once, and one file's metadata.

/** What the read results mean, said once for both read tools. */
const RESULT_RULES =
  '`truncated` is true whenever `content` is not the whole file, for any reason (head, tail or the byte ' +
  'cap); `line_count` counts the lines in `content` (a marker line is not counted). When the byte cap cuts ' +
  'the content, a marker line says how much is missing: at the end ("[truncated: showed N of S bytes]"), or ' +
  'for tail at the top ("[truncated: first K of S bytes not shown]", the partial first line dropped). ' +
  'A file with a NUL byte is binary: {binary: true, content: null}. Invalid UTF-8 is shown with replacement ' +
  'characters and `encoding` "utf-8 (invalid bytes replaced)"; otherwise `encoding` is "utf-8".';

/** Reads the checked file at `real` through its verified directory. */
function readChecked(ctx: ToolContext, real: string, opts: ReadOptions): Promise<TextRead> {
  return onPath(real, () => ctx.paths.withParent(real, (dir, name) => readText(dir, name, opts)));
}

/** Reads one text file within the byte cap; head/tail pick lines without loading a huge file. */
export const readTextFile = defineTool({
  name: 'read_text_file',
  description:
    'Read a UTF-8 text file. Returns {path, content, size_bytes, modified, line_count, truncated, binary, ' +
    'encoding}. Use head or tail (not both) to read only the first or last N lines. The path must name a ' +
    `file (no trailing "/"). ${RESULT_RULES}`,
  input: z.object({
    path: z.string().describe('File to read: absolute, or relative to the first allowed directory'),
    head: z.number().int().min(1).optional().describe('Return only the first N lines'),
    tail: z.number().int().min(1).optional().describe('Return only the last N lines'),
  }),
  output: TextRead,
  annotations: { title: 'Read text file', ...READ_ONLY },
  async execute(args, ctx) {
    if (args.head !== undefined && args.tail !== undefined) {
      throw new ToolError(
        'Give head or tail, not both; to read a middle section, read the file with head first',
      );
    }
    assertFilePath(args.path, 'read_text_file');
    const real = await ctx.paths.resolveForRead(args.path);
    return readChecked(ctx, real, { head: args.head, tail: args.tail, maxBytes: ctx.maxReadBytes });
  },
});

/** Reads several files in one call; each file succeeds or fails on its own. */
export const readMultipleFiles = defineTool({
  name: 'read_multiple_files',
  description:
    'Read several UTF-8 text files at once. Returns {files: [...], succeeded, failed}; each entry is either ' +
    '{ok: true, path, content, size_bytes, modified, line_count, truncated, binary, encoding} or {ok: false, ' +
    'path, error}. A file that cannot be read does not fail the others. Each file is read whole, capped like ' +
    `read_text_file. ${RESULT_RULES}`,
  input: z.object({
    paths: z
      .array(z.string().describe('A file path, absolute or relative to the first allowed directory'))
      .min(1)
      .max(50)
      .describe('The files to read (1 to 50)'),
  }),
  output: z.object({
    files: z.array(
      z.discriminatedUnion('ok', [
        TextRead.extend({ ok: z.literal(true) }),
        z.object({ ok: z.literal(false), path: z.string(), error: z.string() }),
      ]),
    ),
    succeeded: z.number(),
    failed: z.number(),
  }),
  annotations: { title: 'Read multiple files', ...READ_ONLY },
  async execute(args, ctx) {
    const files = await Promise.all(
      args.paths.map(async (p) => {
        try {
          assertFilePath(p, 'read_multiple_files');
          const real = await ctx.paths.resolveForRead(p);
          return { ok: true as const, ...(await readChecked(ctx, real, { maxBytes: ctx.maxReadBytes })) };
        } catch (err) {
          const error = fsMessage(err, p);
          let shownPath = p;
          try {
            shownPath = ctx.paths.absolute(p);
          } catch {
            // Not a usable path at all (empty, NUL byte): show it as given.
          }
          return { ok: false as const, path: shownPath, error };
        }
      }),
    );
    const succeeded = files.filter((f) => f.ok).length;
    return { files, succeeded, failed: files.length - succeeded };
  },
});

/** A file's or directory's metadata, so the model can check before it reads, writes or deletes. */
export const getFileInfo = defineTool({
  name: 'get_file_info',
  description:
    'Get metadata of a file or directory: {path, type, size_bytes, created, modified, accessed (ISO times), ' +
    'permissions (octal, e.g. "644"), is_symlink}. For a symbolic link, `path` is where it points and ' +
    '`symlink_path` is the link itself.',
  input: z.object({
    path: z.string().describe('File or directory: absolute, or relative to the first allowed directory'),
  }),
  output: z.object({
    path: z.string(),
    type: EntryType,
    size_bytes: z.number(),
    created: IsoTime,
    modified: IsoTime,
    accessed: IsoTime,
    permissions: z.string().describe('Octal permission bits, e.g. "644"'),
    is_symlink: z.boolean(),
    symlink_path: z.string().optional().describe('The link itself, when `path` is where it points'),
  }),
  annotations: { title: 'Get file info', ...READ_ONLY },
  async execute(args, ctx) {
    const real = await ctx.paths.resolveForRead(args.path);
    const info = await onPath(real, () => ctx.paths.lstatEntry(real));
    if (info.isSymbolicLink()) {
      throw new ToolError(`${real} is a symbolic link (it changed after it was checked); try again`);
    }
    const entry = await ctx.paths.resolveEntryForRead(args.path);
    const link = entry === real ? null : await ctx.paths.lstatEntry(entry).catch(() => null);
    const isSymlink = link?.isSymbolicLink() ?? false;
    return {
      path: real,
      type: entryType(info),
      size_bytes: info.size,
      created: iso(info.birthtime),
      modified: iso(info.mtime),
      accessed: iso(info.atime),
      permissions: (info.mode & 0o7777).toString(8).padStart(3, '0'),
      is_symlink: isSymlink,
      ...(isSymlink ? { symlink_path: entry } : {}),
    };
  },
});

import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { z } from 'zod';
import type { VerifiedDir } from '../../guards/paths/fd-path.ts';
import { CHANGES, defineTool, OVERWRITES } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { assertFilePath, countLines, existing, IsoTime, iso, onPath, writeReplacing } from './common.ts';
import { readWholeText } from './text.ts';

// The tools that change a file's content: write it whole, or apply exact-text edits and show the diff.
// Both replace the file (temp file + rename) rather than write into it, so a hard link at the path is
// replaced, never written through, and the file keeps its permission bits. A symlink inside the roots was
// resolved by the guard: the write replaces its target and the link stays. Everything happens through the
// verified parent directory (tool-server/guards/paths/fd-path.ts), so a directory swapped for a symlink meanwhile is not followed.

/** Creates or replaces a text file, making its parent directories inside the root. */
export const writeFile = defineTool({
  name: 'write_file',
  description:
    'Create a text file, or replace an existing file completely, with the given content (UTF-8). Any missing ' +
    'parent directory is created. Returns {path, action: "created"|"overwritten", size_bytes, line_count, ' +
    'modified}. The path must name a file (no trailing "/"). To change part of an existing file, prefer edit_file.',
  input: z.object({
    path: z.string().describe('File to write: absolute, or relative to the first allowed directory'),
    content: z.string().describe('The complete new content of the file'),
  }),
  output: z.object({
    path: z.string(),
    action: z.enum(['created', 'overwritten']),
    size_bytes: z.number(),
    line_count: z.number(),
    modified: IsoTime,
  }),
  annotations: { title: 'Write file', ...OVERWRITES },
  async execute(args, ctx) {
    assertFilePath(args.path, 'write_file');
    const real = await ctx.paths.resolveForWrite(args.path);
    if (ctx.paths.isRoot(real))
      throw new ToolError(`${real} is a directory; give the path of a file to write`);
    const parent = path.dirname(real);
    const name = path.basename(real);
    const { dir } = await onPath(parent, () => ctx.paths.makeDirectory(parent));
    try {
      const before = await existing(dir, name);
      if (before?.isDirectory())
        throw new ToolError(`${real} is a directory; give the path of a file to write`);
      if (before && !before.isFile())
        throw new ToolError(`${real} is not a regular file; it cannot be written`);
      await writeReplacing(dir, name, args.content, before?.mode);
      const after = await onPath(real, () => lstat(dir.entry(name)));
      return {
        path: real,
        action: before ? ('overwritten' as const) : ('created' as const),
        size_bytes: after.size,
        line_count: countLines(args.content),
        modified: iso(after.mtime),
      };
    } finally {
      await dir.close();
    }
  },
});

/** Every start index of `needle` in `hay`, overlapping ones included, so "aa" in "aaa" counts twice. */
function occurrences(hay: string, needle: string): number {
  let count = 0;
  for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + 1)) count++;
  return count;
}

const toCrlf = (s: string) => s.replace(/\r?\n/g, '\r\n');
const toLf = (s: string) => s.replace(/\r\n/g, '\n');

/** A file's line endings when it uses one kind only; null for mixed endings or a single line. */
function lineEndings(text: string): 'crlf' | 'lf' | null {
  const crlf = text.includes('\r\n');
  const bareLf = /(?<!\r)\n/.test(text);
  if (crlf && !bareLf) return 'crlf';
  if (bareLf && !crlf) return 'lf';
  return null;
}

/** Applies one edit to `text`, or explains why it does not match exactly once. */
function applyEdit(text: string, edit: { old_text: string; new_text: string }, where: string): string {
  let { old_text: oldText, new_text: newText } = edit;
  let count = occurrences(text, oldText);
  // old_text may carry the other line endings (LF typed against a CRLF file, or CRLF pasted against an LF
  // file): retry with each kind converted, and convert new_text the same way.
  for (const convert of [toCrlf, toLf]) {
    if (count > 0) break;
    const converted = convert(oldText);
    if (converted === oldText) continue;
    const convertedCount = occurrences(text, converted);
    if (convertedCount > 0) {
      count = convertedCount;
      oldText = converted;
      newText = convert(newText);
    }
  }
  // A file with one kind of line ending keeps it: new lines get that kind, whatever the edit held.
  const endings = lineEndings(text);
  if (endings === 'crlf') newText = toCrlf(newText);
  if (endings === 'lf') newText = toLf(newText);
  if (count === 0) {
    throw new ToolError(
      `${where}: old_text was not found. It must match the file exactly, including whitespace and ` +
        'indentation; read the file again and copy the text. No edits were applied.',
    );
  }
  if (count > 1) {
    throw new ToolError(
      `${where}: old_text occurs ${count} times, include more surrounding context so that it matches ` +
        'exactly once. No edits were applied.',
    );
  }
  const at = text.indexOf(oldText);
  return text.slice(0, at) + newText + text.slice(at + oldText.length);
}

/** Changes part of a text file by exact replacements and returns the unified diff, optionally as a dry run. */
export const editFile = defineTool({
  name: 'edit_file',
  description:
    'Edit a text file by exact-text replacements, applied in order. Each old_text must occur exactly once in ' +
    'the file (as it is after the previous edits); if one does not match, nothing is written. Returns ' +
    '{path, applied, diff (unified diff), size_bytes, line_count, modified}. With dry_run: true the file is ' +
    'left untouched and the diff shows what would change. old_text matches whatever its line endings (LF or ' +
    'CRLF); the file keeps its own: in a CRLF file new lines are written as CRLF, in an LF file as LF.',
  input: z.object({
    path: z.string().describe('File to edit: absolute, or relative to the first allowed directory'),
    edits: z
      .array(
        z.object({
          old_text: z
            .string()
            .min(1)
            .describe('Text to replace; must match exactly once, whitespace included'),
          new_text: z.string().describe('Replacement text (empty to delete old_text)'),
        }),
      )
      .min(1)
      .describe('Replacements to apply in order'),
    dry_run: z.boolean().optional().describe('Preview the diff without changing the file (default false)'),
  }),
  output: z.object({
    path: z.string(),
    applied: z.boolean().describe('Whether the file was written (false for a dry run)'),
    dry_run: z.boolean(),
    changed: z.boolean().describe('Whether the edits change the content'),
    diff: z.string().describe('Unified diff of the edits'),
    size_bytes: z.number(),
    line_count: z.number(),
    modified: IsoTime,
  }),
  annotations: { title: 'Edit file', ...CHANGES },
  async execute(args, ctx) {
    assertFilePath(args.path, 'edit_file');
    const real = await ctx.paths.resolveForWrite(args.path);
    // Read and replace through one verified directory: the edit lands in the file it was computed from.
    const edit = async (dir: VerifiedDir, name: string) => {
      const { text, modified, mode } = await readWholeText(dir, name);
      let next = text;
      args.edits.forEach((e, i) => {
        next = applyEdit(next, e, `Edit ${i + 1} of ${args.edits.length} in ${real}`);
      });
      const diff = createTwoFilesPatch(real, real, text, next, 'original', 'modified');
      const dryRun = args.dry_run ?? false;
      const changed = next !== text;
      const outcome = { path: real, applied: !dryRun, dry_run: dryRun, changed, diff };
      if (dryRun)
        return { ...outcome, size_bytes: Buffer.byteLength(text), line_count: countLines(text), modified };
      if (changed) await writeReplacing(dir, name, next, mode);
      const after = await onPath(real, () => lstat(dir.entry(name)));
      return { ...outcome, size_bytes: after.size, line_count: countLines(next), modified: iso(after.mtime) };
    };
    return onPath(real, () => ctx.paths.withParent(real, edit));
  },
});

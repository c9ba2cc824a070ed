import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { z } from 'zod';
import { defineTool, ToolError } from './define.ts';
import { assertFilePath, countLines, existing, iso, onPath, writeReplacing } from './fs-common.ts';
import { readWholeText } from './fs-text.ts';

// The tools that change a file's content: write it whole, or apply exact-text edits and show the diff.
// Both replace the file (temp file + rename) rather than write into it, so a hard or symbolic link at the
// path is replaced, never written through, and the file keeps its permission bits.

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
  annotations: { title: 'Write file', readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async execute(args, ctx) {
    assertFilePath(args.path, 'write_file');
    const real = await ctx.paths.resolveForWrite(args.path);
    const before = await existing(real);
    if (before?.isDirectory())
      throw new ToolError(`${real} is a directory; give the path of a file to write`);
    if (before && !before.isFile())
      throw new ToolError(`${real} is not a regular file; it cannot be written`);
    const parent = path.dirname(real);
    await onPath(parent, () => mkdir(parent, { recursive: true }));
    await writeReplacing(real, args.content, before?.mode);
    const after = await onPath(real, () => stat(real));
    return {
      path: real,
      action: before ? 'overwritten' : 'created',
      size_bytes: after.size,
      line_count: countLines(args.content),
      modified: iso(after.mtime),
    };
  },
});

/** Every start index of `needle` in `hay`, overlapping ones included, so "aa" in "aaa" counts twice. */
function occurrences(hay: string, needle: string): number {
  let count = 0;
  for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + 1)) count++;
  return count;
}

const toCrlf = (s: string) => s.replace(/\r?\n/g, '\r\n');

/** Applies one edit to `text`, or explains why it does not match exactly once. */
function applyEdit(text: string, edit: { old_text: string; new_text: string }, where: string): string {
  let { old_text: oldText, new_text: newText } = edit;
  let count = occurrences(text, oldText);
  // The model usually sends '\n'; a CRLF file would never match, so retry with the file's line endings.
  if (count === 0 && oldText.includes('\n') && !oldText.includes('\r') && text.includes('\r\n')) {
    const crlfCount = occurrences(text, toCrlf(oldText));
    if (crlfCount > 0) {
      count = crlfCount;
      oldText = toCrlf(oldText);
      newText = toCrlf(newText);
    }
  }
  // In a CRLF file (CRLF endings, no bare LF) new lines get CRLF too, whatever old_text held: no mixed endings.
  if (text.includes('\r\n') && !/(?<!\r)\n/.test(text)) newText = toCrlf(newText);
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
    'left untouched and the diff shows what would change. In a file with CRLF line endings, newlines in ' +
    'new_text are written as CRLF.',
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
  annotations: { title: 'Edit file', readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  async execute(args, ctx) {
    assertFilePath(args.path, 'edit_file');
    const real = await ctx.paths.resolveForWrite(args.path);
    const { text, modified, mode } = await readWholeText(real);
    let next = text;
    args.edits.forEach((edit, i) => {
      next = applyEdit(next, edit, `Edit ${i + 1} of ${args.edits.length} in ${real}`);
    });
    const diff = createTwoFilesPatch(real, real, text, next, 'original', 'modified');
    const dryRun = args.dry_run ?? false;
    const changed = next !== text;
    const outcome = { path: real, applied: !dryRun, dry_run: dryRun, changed, diff };
    if (dryRun)
      return { ...outcome, size_bytes: Buffer.byteLength(text), line_count: countLines(text), modified };
    if (changed) await writeReplacing(real, next, mode);
    const after = await onPath(real, () => stat(real));
    return { ...outcome, size_bytes: after.size, line_count: countLines(next), modified: iso(after.mtime) };
  },
});

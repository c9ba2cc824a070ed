import { constants } from 'node:fs';
import { type FileHandle, lstat, open } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { VerifiedDir } from '../../guards/paths/fd-path.ts';
import { ToolError } from '../../kit/errors.ts';
import { countLines, IsoTime, iso, LIMITS, NO_FOLLOW, onPath } from './common.ts';

// Reading text the way a model needs it: never more than the byte cap, head/tail without loading a huge
// file, and binary content reported rather than decoded into noise. Reads go through a hard link that
// already exists in a root (it cannot be told apart from the file's other names, and these tools cannot
// create one); writes replace the name instead of writing to the inode (see writeReplacing).

const SNIFF_BYTES = 8192;
const CHUNK = 64 * 1024;
const NEWLINE = 0x0a;

/** How a file's text was decoded: strict UTF-8, or UTF-8 with invalid sequences replaced by U+FFFD. */
const TextEncoding = z.enum(['utf-8', 'utf-8 (invalid bytes replaced)']);
type TextEncoding = z.infer<typeof TextEncoding>;

/** The structured result of reading one file; `truncated` means `content` is not the whole file. */
export const TextRead = z.object({
  path: z.string(),
  binary: z.boolean(),
  encoding: TextEncoding.nullable().describe('null for a binary file'),
  content: z.string().nullable().describe('null for a binary file'),
  size_bytes: z.number(),
  modified: IsoTime,
  line_count: z.number().nullable().describe('Lines in `content`; null for a binary file'),
  truncated: z.boolean(),
});
export type TextRead = z.infer<typeof TextRead>;

/** Which part of a file to read; `maxBytes` is the service's cap (`ctx.maxReadBytes`). */
export interface ReadOptions {
  head?: number;
  tail?: number;
  maxBytes: number;
}

/** The bytes chosen to show, where they start in the file, whether the cap cut them, and all bytes read. */
interface Part {
  shown: Buffer;
  start: number;
  capped: boolean;
  read: Buffer;
  readStart: number;
}

/**
 * The one text-or-binary decision, for every read: a NUL byte anywhere in the bytes read means binary
 * (null); anything else is UTF-8, with invalid sequences replaced and the encoding saying so.
 */
function decode(
  shown: Uint8Array,
  alsoRead: (Uint8Array | undefined)[] = [],
): { text: string; encoding: TextEncoding } | null {
  if (shown.includes(0) || alsoRead.some((b) => b?.includes(0))) return null;
  try {
    const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(shown);
    return { text, encoding: 'utf-8' };
  } catch {
    const text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(shown);
    return { text, encoding: 'utf-8 (invalid bytes replaced)' };
  }
}

/** The length of `bytes` without a multi-byte character that the cap cut off at the end. */
function completeEnd(bytes: Buffer): number {
  for (let back = 1; back <= Math.min(4, bytes.length); back++) {
    const byte = bytes[bytes.length - back];
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: keep looking for the lead byte
    const needs = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needs > back ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}

/** How many continuation bytes of a character cut off at the start `bytes` begins with. */
function partialStart(bytes: Buffer): number {
  let start = 0;
  while (start < 3 && start < bytes.length && (bytes[start] & 0xc0) === 0x80) start++;
  return start;
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, position + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return buffer.subarray(0, filled);
}

/** An open regular file and what the read results report about it. */
export interface OpenFile {
  handle: FileHandle;
  size: number;
  modified: string | null;
  mode: number;
}

const READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | (constants.O_NOCTTY ?? 0) | NO_FOLLOW;

/**
 * Opens the regular file `name` in `dir` (never through a symlink: the guard has resolved those, so one here
 * was swapped in since); refuses directories and devices, checking the opened descriptor itself.
 */
export async function openRegular(dir: VerifiedDir, name: string): Promise<OpenFile> {
  const real = path.join(dir.real, name);
  const before = await onPath(real, () => lstat(dir.entry(name)));
  if (before.isDirectory()) throw new ToolError(`${real} is a directory, not a file; use list_directory`);
  if (before.isSymbolicLink()) {
    throw new ToolError(`${real} is a symbolic link (it changed after it was checked); try again`);
  }
  if (!before.isFile()) throw new ToolError(`${real} is not a regular file (device, socket or pipe)`);
  const handle = await onPath(real, () => open(dir.entry(name), READ_FLAGS));
  const info = await handle.stat();
  if (!info.isFile()) {
    await handle.close();
    throw new ToolError(`${real} is not a regular file (it changed after it was checked); try again`);
  }
  return { handle, size: info.size, modified: iso(info.mtime), mode: info.mode };
}

/** Reads up to `max` bytes from the start, stopping early once `lines` newlines are in. */
async function readForward(handle: FileHandle, max: number, lines?: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  let newlines = 0;
  while (total < max) {
    const chunk = await readAt(handle, total, Math.min(CHUNK, max - total));
    if (chunk.length === 0) break;
    chunks.push(chunk);
    total += chunk.length;
    if (lines !== undefined) {
      for (const byte of chunk) if (byte === NEWLINE) newlines++;
      if (newlines >= lines) break;
    }
  }
  return Buffer.concat(chunks);
}

/** Reads backwards from the end, at most `max` bytes, until `lines` full lines are in. */
async function readBackward(handle: FileHandle, size: number, max: number, lines: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let position = size;
  let newlines = 0;
  let lastByte: number | undefined;
  while (position > 0 && size - position < max) {
    const length = Math.min(CHUNK, position, max - (size - position));
    position -= length;
    const chunk = await readAt(handle, position, length);
    chunks.unshift(chunk);
    lastByte ??= chunk[chunk.length - 1];
    for (const byte of chunk) if (byte === NEWLINE) newlines++;
    // The file's own final newline ends the last line; one more newline is needed to find the start.
    if (newlines >= lines + (lastByte === NEWLINE ? 1 : 0)) break;
  }
  return Buffer.concat(chunks);
}

/** Where the last `lines` lines start in `bytes` (after the newline before them), or null if it has fewer. */
function lastLinesStart(bytes: Buffer, lines: number): number | null {
  let end = bytes.length;
  if (end > 0 && bytes[end - 1] === NEWLINE) end--;
  let found = 0;
  for (let i = end - 1; i >= 0; i--) {
    if (bytes[i] === NEWLINE && ++found === lines) return i + 1;
  }
  return null;
}

/** The bytes up to and including the `lines`-th newline, or null when the buffer has fewer. */
function firstLines(bytes: Buffer, lines: number): Buffer | null {
  let found = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === NEWLINE && ++found === lines) return bytes.subarray(0, i + 1);
  }
  return null;
}

/** The first `lines` lines (or the whole file) within the cap; a character the cap cuts is not shown. */
async function headPart(handle: FileHandle, size: number, max: number, lines?: number): Promise<Part> {
  const read = await readForward(handle, max, lines);
  const wanted = lines === undefined ? null : firstLines(read, lines);
  if (wanted) return { shown: wanted, start: 0, capped: false, read, readStart: 0 };
  const capped = read.length < size;
  const shown = capped ? read.subarray(0, completeEnd(read)) : read;
  return { shown, start: 0, capped, read, readStart: 0 };
}

/** The last `lines` lines within the cap; when they do not fit, the last whole lines that do. */
async function tailPart(handle: FileHandle, size: number, max: number, lines: number): Promise<Part> {
  // One byte more than the cap: it tells whether a window of exactly `max` bytes starts a line.
  const read = await readBackward(handle, size, max + 1, lines);
  const readStart = size - read.length;
  const from = lastLinesStart(read, lines) ?? (readStart === 0 ? 0 : null);
  if (from !== null && read.length - from <= max) {
    return { shown: read.subarray(from), start: readStart + from, capped: false, read, readStart };
  }
  // Capped (read.length > max here): keep the last `max` bytes without the partial line they begin with,
  // unless that line is all there is; then only the bytes of a character cut in two are dropped.
  let cut = read.length - max;
  if (read[cut - 1] !== NEWLINE) {
    const newline = read.indexOf(NEWLINE, cut);
    cut = newline !== -1 && newline + 1 < read.length ? newline + 1 : cut + partialStart(read.subarray(cut));
  }
  return { shown: read.subarray(cut), start: readStart + cut, capped: true, read, readStart };
}

/** Reads the file `name` in `dir` as text within the byte cap, or reports it as binary. */
export async function readText(dir: VerifiedDir, name: string, opts: ReadOptions): Promise<TextRead> {
  const real = path.join(dir.real, name);
  const { handle, size, modified } = await openRegular(dir, name);
  try {
    const max = Math.max(1, opts.maxBytes);
    const part =
      opts.tail === undefined
        ? await headPart(handle, size, max, opts.head)
        : await tailPart(handle, size, max, opts.tail);
    // Binary formats put their NULs up front: a read that skipped the start looks at it too.
    const sniffLength = Math.min(SNIFF_BYTES, size);
    const covered = part.readStart === 0 && part.read.length >= sniffLength;
    const sniff = covered ? undefined : await readAt(handle, 0, sniffLength);
    const base = { path: real, size_bytes: size, modified };
    const decoded = decode(part.shown, [part.read, sniff]);
    if (!decoded) {
      return { ...base, binary: true, encoding: null, content: null, line_count: null, truncated: false };
    }
    const { text, encoding } = decoded;
    let content = text;
    if (part.capped && part.start > 0) {
      content = `[truncated: first ${part.start} of ${size} bytes not shown]\n${text}`;
    } else if (part.capped) {
      const marker = `[truncated: showed ${part.shown.length} of ${size} bytes]`;
      content = `${text}${text === '' || text.endsWith('\n') ? '' : '\n'}${marker}`;
    }
    return {
      ...base,
      binary: false,
      encoding,
      content,
      line_count: countLines(text),
      truncated: part.start > 0 || part.start + part.shown.length < size,
    };
  } finally {
    await handle.close();
  }
}

/** A whole text file for editing, with its mode; refuses binary, invalid UTF-8 and files too big to edit. */
export async function readWholeText(
  dir: VerifiedDir,
  name: string,
): Promise<{ text: string; modified: string | null; mode: number }> {
  const real = path.join(dir.real, name);
  const { handle, size, modified, mode } = await openRegular(dir, name);
  try {
    if (size > LIMITS.editBytes) {
      throw new ToolError(
        `${real} is ${size} bytes; edit_file handles files up to ${LIMITS.editBytes} bytes`,
      );
    }
    const decoded = decode(await readAt(handle, 0, size));
    if (!decoded)
      throw new ToolError(`${real} is a binary file (it contains NUL bytes); it cannot be edited`);
    if (decoded.encoding !== 'utf-8') {
      throw new ToolError(
        `${real} is not valid UTF-8; editing it would replace its invalid bytes, so it cannot be edited`,
      );
    }
    return { text: decoded.text, modified, mode };
  } finally {
    await handle.close();
  }
}

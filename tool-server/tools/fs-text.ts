import { constants } from 'node:fs';
import { type FileHandle, open, stat } from 'node:fs/promises';
import { ToolError } from './define.ts';
import { countLines, iso, LIMITS, NO_FOLLOW, onPath } from './fs-common.ts';

// Reading text the way a model needs it: never more than the byte cap, head/tail without loading a huge
// file, and binary content reported rather than decoded into noise.

const SNIFF_BYTES = 8192;
const CHUNK = 64 * 1024;
const NEWLINE = 0x0a;

/** The structured result of reading one file. */
export interface TextRead {
  path: string;
  binary: boolean;
  content: string | null;
  size_bytes: number;
  modified: string | null;
  line_count: number | null;
  truncated: boolean;
}

/** Which part of a file to read; `maxBytes` is the service's cap (`ctx.maxReadBytes`). */
export interface ReadOptions {
  head?: number;
  tail?: number;
  maxBytes: number;
}

/** Decodes UTF-8 strictly; `partial` drops an incomplete character cut off at the end. Null if invalid. */
function decode(bytes: Uint8Array, partial: boolean): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes, { stream: partial });
  } catch {
    return null;
  }
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

/** Opens a regular file for reading; refuses directories and devices before open() could block on them. */
async function openRegular(
  real: string,
): Promise<{ handle: FileHandle; size: number; modified: string | null }> {
  const info = await onPath(real, () => stat(real));
  if (info.isDirectory()) throw new ToolError(`${real} is a directory, not a file; use list_directory`);
  if (!info.isFile()) throw new ToolError(`${real} is not a regular file (device, socket or pipe)`);
  const handle = await onPath(real, () => open(real, constants.O_RDONLY | constants.O_NONBLOCK | NO_FOLLOW));
  return { handle, size: info.size, modified: iso(info.mtime) };
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

/** The bytes after the newline that starts the last `lines` lines, or null when the buffer has fewer. */
function lastLines(bytes: Buffer, lines: number): Buffer | null {
  let end = bytes.length;
  if (end > 0 && bytes[end - 1] === NEWLINE) end--;
  let found = 0;
  for (let i = end - 1; i >= 0; i--) {
    if (bytes[i] === NEWLINE && ++found === lines) return bytes.subarray(i + 1);
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

/** Reads a file as text within the byte cap, or reports it as binary. */
export async function readText(real: string, opts: ReadOptions): Promise<TextRead> {
  const { handle, size, modified } = await openRegular(real);
  try {
    const base = { path: real, size_bytes: size, modified };
    const sniff = await readAt(handle, 0, Math.min(SNIFF_BYTES, size));
    const binary = { ...base, binary: true, content: null, line_count: null, truncated: false };
    if (sniff.includes(0)) return binary;

    const max = Math.max(1, opts.maxBytes);
    let bytes: Buffer;
    let truncated: boolean;
    if (opts.tail !== undefined) {
      const read = await readBackward(handle, size, max, opts.tail);
      const wanted = lastLines(read, opts.tail);
      truncated = wanted === null && read.length < size;
      bytes = wanted ?? read;
      // A cut in the middle of a multi-byte character: drop its continuation bytes.
      let start = 0;
      while (truncated && start < 3 && start < bytes.length && (bytes[start] & 0xc0) === 0x80) start++;
      bytes = bytes.subarray(start);
    } else {
      const read = await readForward(handle, max, opts.head);
      const wanted = opts.head === undefined ? null : firstLines(read, opts.head);
      bytes = wanted ?? read;
      truncated = wanted === null && read.length < size;
    }
    const text = decode(bytes, truncated);
    if (text === null) return binary;
    const marker = `[truncated: showed ${bytes.length} of ${size} bytes]`;
    return {
      ...base,
      binary: false,
      content: truncated ? `${text}${text === '' || text.endsWith('\n') ? '' : '\n'}${marker}` : text,
      line_count: countLines(text),
      truncated,
    };
  } finally {
    await handle.close();
  }
}

/** A whole text file for editing; refuses binary files and files too big to rewrite in memory. */
export async function readWholeText(real: string): Promise<{ text: string; modified: string | null }> {
  const { handle, size, modified } = await openRegular(real);
  try {
    if (size > LIMITS.editBytes) {
      throw new ToolError(
        `${real} is ${size} bytes; edit_file handles files up to ${LIMITS.editBytes} bytes`,
      );
    }
    const bytes = await readAt(handle, 0, size);
    const text = bytes.subarray(0, SNIFF_BYTES).includes(0) ? null : decode(bytes, false);
    if (text === null) throw new ToolError(`${real} is a binary file (not UTF-8 text); it cannot be edited`);
    return { text, modified };
  } finally {
    await handle.close();
  }
}

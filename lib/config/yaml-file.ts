import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { type Document, LineCounter, parseDocument } from 'yaml';

// Every YAML file an operator or a user writes (toolsets, the policy, prompts) is read here, so that each
// way such a file can be bad is that file's error, with its name and line: a syntax error, a file too big,
// and aliases that expand without bound (a "billion laughs" file, a few hundred bytes that become gigabytes
// in toJS() or in anything that walks the result). Callers turn the error into their own kind (a skipped
// toolset, a refused policy), never a crash.

/** Larger than any hand-written configuration file; a bigger one is refused unread. */
export const MAX_YAML_FILE_BYTES = 1024 * 1024;

/**
 * How many nodes aliases may add in one document (yaml's own measure: each alias counts the aliases inside
 * what it repeats). Real files use a few aliases; a billion-laughs file needs millions.
 */
export const MAX_YAML_ALIASES = 100;

/** A YAML file that cannot be used; the message starts with the file (and line). */
export class YamlFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A parsed file: its document (for line lookups), the line counter, and its plain value. */
export interface ParsedYaml {
  doc: Document.Parsed;
  lines: LineCounter;
  value: unknown;
}

/**
 * Parses `text` of `file`; throws YamlFileError naming the file and line. `hint` may add a remedy to a
 * syntax error (it gets the text).
 */
export function parseYamlText(text: string, file: string, hint?: (text: string) => string): ParsedYaml {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const extra = hint?.(text) ?? '';
    throw new YamlFileError(`${file}:${lines.linePos(e.pos[0]).line}: not valid YAML: ${e.message}${extra}`);
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (err) {
    // yaml throws a ReferenceError for too many aliases, and for an alias to an anchor it cannot resolve.
    const excessive = /Excessive alias count/.test((err as Error).message);
    throw new YamlFileError(
      excessive
        ? `${file}: its aliases (*name) expand to more than ${MAX_YAML_ALIASES} nodes; write the values out instead of repeating them through aliases`
        : `${file}: not valid YAML: ${(err as Error).message}`,
    );
  }
  return { doc, lines, value };
}

/**
 * The text of a configuration file (YAML or JSON), at most MAX_YAML_FILE_BYTES; else YamlFileError. Only a
 * regular file is read: it is opened without blocking and checked on the open descriptor (a named pipe, a
 * device or a directory — or a link to one — is that file's error, not a load that never ends), and no more
 * than the bound is read whatever its size said.
 */
export function readConfigText(file: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
    const stat = fstatSync(fd);
    if (!stat.isFile())
      throw new YamlFileError(`${file}: not a regular file; a configuration file must be one`);
    const buf = Buffer.alloc(Math.min(stat.size, MAX_YAML_FILE_BYTES) + 1);
    let length = 0;
    for (let n = 1; n > 0 && length < buf.length; length += n)
      n = readSync(fd, buf, length, buf.length - length, null);
    if (length > MAX_YAML_FILE_BYTES || stat.size > MAX_YAML_FILE_BYTES) {
      throw new YamlFileError(
        `${file}: ${Math.max(stat.size, length)} bytes, more than the ${MAX_YAML_FILE_BYTES} a configuration file may have`,
      );
    }
    return buf.toString('utf8', 0, length);
  } catch (err) {
    if (err instanceof YamlFileError) throw err;
    throw new YamlFileError(`${file}: cannot be read: ${(err as Error).message}`);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Reads and parses `file` (at most MAX_YAML_FILE_BYTES); throws YamlFileError naming the file. */
export function readYamlFile(file: string, hint?: (text: string) => string): ParsedYaml & { text: string } {
  const text = readConfigText(file);
  return { ...parseYamlText(text, file, hint), text };
}

import path from 'node:path';
import { ToolError } from '../../kit/errors.ts';
import type { Unresolvable } from './resolve.ts';

// The path guard's refusals, each worded once: a path outside the roots (one answer, whatever is there), a
// protected path, and a path inside the roots that cannot be resolved safely.

/** The one refusal for a path that is, or leads, outside the roots; callers may tell it from other refusals. */
export class OutsideRootsError extends ToolError {}

const UNRESOLVABLE: Record<string, string> = {
  ELOOP: 'too many levels of symbolic links',
  EACCES: 'permission denied on a parent directory',
  ENOTDIR: 'a component of the path is a file, not a directory',
  ENAMETOOLONG: 'the path is too long',
  // A link read as it was being replaced, an entry gone between two steps: something else is changing it.
  EINVAL: 'it changed while it was being checked; try again',
  ENOENT: 'it changed while it was being checked; try again',
};

/** The one wording of "this path is protected", for every write check. */
export function protectedRefusal(abs: string, pattern: string): ToolError {
  // Protected paths are absolute; blocked patterns are globs relative to a root.
  const what = path.isAbsolute(pattern)
    ? "toolshift's own installation, configuration and data"
    : 'version control, dependencies, keys and secrets';
  return new ToolError(
    `Access denied: ${abs} matches the protected pattern "${pattern}"; files like this (${what}) cannot be modified`,
  );
}

/** Why a path inside the roots cannot be used (an outward path is refused as outside before this). */
export function unresolvableRefusal(
  abs: string,
  reason: Exclude<Unresolvable, { kind: 'outside' }>,
): ToolError {
  if (reason.kind === 'dangling') {
    return new ToolError(
      `Access denied: ${reason.link} is a symbolic link whose target does not exist; it cannot be used`,
    );
  }
  if (reason.kind === 'ambiguous') {
    return new ToolError(
      `${abs} matches several entries of ${reason.dir} that differ only in Unicode normalisation ` +
        `(${reason.matches.map((m) => JSON.stringify(m)).join(', ')}); give the exact name`,
    );
  }
  return new ToolError(
    `Access denied: ${abs} cannot be resolved safely: ${UNRESOLVABLE[reason.code] ?? reason.code}`,
  );
}

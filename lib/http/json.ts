// JSON from outside (request bodies, a model's tool arguments) is bounded in nesting before it is parsed,
// so a 100,000-level document is a clear 400, not a stack overflow somewhere further on.

/** How deep accepted JSON may nest: far beyond any real tool arguments, far below any recursion limit. */
export const MAX_JSON_DEPTH = 64;

/** A JSON text that is malformed (`syntax`) or nests too deeply (`depth`); `detail` says where or how deep. */
export class JsonInputError extends Error {
  readonly kind: 'syntax' | 'depth';
  readonly detail: string;

  constructor(kind: 'syntax' | 'depth', detail: string) {
    super(kind === 'syntax' ? `not valid JSON (${detail})` : detail);
    this.kind = kind;
    this.detail = detail;
    this.name = new.target.name;
  }
}

/** The deepest nesting of arrays and objects in `text`, scanning once and stopping past `limit`. */
function nesting(text: string, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x7b || ch === 0x5b) {
      depth++;
      if (depth > max) max = depth;
      if (max > limit) return max;
    } else if (ch === 0x7d || ch === 0x5d) depth--;
  }
  return max;
}

/** JSON.parse with a nesting bound; throws JsonInputError naming the problem. */
export function parseJson(text: string, maxDepth = MAX_JSON_DEPTH): unknown {
  if (nesting(text, maxDepth) > maxDepth) {
    throw new JsonInputError('depth', `nests deeper than ${maxDepth} levels of arrays/objects`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new JsonInputError('syntax', (err as Error).message);
  }
}

/** True when an already-parsed value nests deeper than `maxDepth` (for values that did not come as text). */
export function nestsDeeperThan(value: unknown, maxDepth = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (typeof v !== 'object' || v === null) continue;
    if (d + 1 > maxDepth) return true;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return false;
}

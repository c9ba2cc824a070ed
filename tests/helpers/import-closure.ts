import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

// What a running toolshift loads, found from its entry points: every relative module reached by a runtime
// import (static, re-export, dynamic with a literal path) or started as a worker or child process
// (`siblingModule(import.meta.url, './x.ts')`, lib/config/installation.ts), and the packages imported by name.
// Type-only imports are left out: Node's type stripping erases them.

const RUNTIME_IMPORT =
  /^\s*(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s*)?['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)|\bsiblingModule\(\s*import\.meta\.url\s*,\s*['"]([^'"]+)['"]\s*\)|new URL\(\s*['"](\.{1,2}\/[^'"]+\.(?:ts|js))['"]\s*,\s*import\.meta\.url\s*\)/gm;

export interface Closure {
  /** Repository-relative paths of every module loaded. */
  files: string[];
  /** Package names imported by name (`node:` built-ins excluded), with the first file importing each. */
  packages: Map<string, string>;
}

/** The package a bare specifier names: `@scope/name` or `name` (subpaths dropped). */
function packageOf(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** The modules and packages reached from `entries` (repository-relative), reading files under `root`. */
export function importClosure(root: string, entries: readonly string[]): Closure {
  const seen = new Set<string>();
  const packages = new Map<string, string>();
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.shift() as string;
    if (seen.has(file)) continue;
    const full = path.join(root, file);
    if (!existsSync(full)) throw new Error(`${file} is imported but does not exist`);
    seen.add(file);
    // Comments may mention imports; a module's code does not start a line with `//` or ` *`.
    const code = readFileSync(full, 'utf8').replace(/^\s*(\/\/|\*|\/\*).*$/gm, '');
    for (const m of code.matchAll(RUNTIME_IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3] ?? m[4];
      const target = path.normalize(path.join(path.dirname(file), spec));
      // dist/ is what `npm pack` builds for the package: bin/toolshift.js loads it only where no sources are.
      if (spec.startsWith('.')) {
        if (!target.startsWith(`dist${path.sep}`)) queue.push(target);
      } else if (!spec.startsWith('node:') && !packages.has(packageOf(spec)))
        packages.set(packageOf(spec), file);
    }
  }
  return { files: [...seen].sort(), packages };
}

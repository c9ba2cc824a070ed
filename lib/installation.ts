import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Where the running toolshift is installed: the directory holding its own package.json, found from this
// module's location (not the working directory, which may be anywhere). What lies there runs at the next
// start (package.json scripts, sources, node_modules), so the file tools treat it as read-only.

/** The installation directory: the nearest ancestor of this file whose package.json names toolshift. */
export function installationDir(from: string = fileURLToPath(import.meta.url)): string {
  for (let dir = path.dirname(from); ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'toolshift')
          return dir;
      } catch {
        // An unreadable manifest is not ours; keep climbing.
      }
    }
    if (dir === path.dirname(dir)) throw new Error(`cannot find toolshift's package.json above ${from}`);
  }
}

import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
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

/** The version of the running toolshift, from its package.json. */
export function installedVersion(): string {
  const manifest = path.join(installationDir(), 'package.json');
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/**
 * Where toolshift keeps its data unless TOOLSHIFT_DATA_DIR says otherwise: the user's data directory, as
 * other daemons do — `$XDG_DATA_HOME/toolshift` (default `~/.local/share/toolshift`) on Linux and other
 * Unixes, `~/Library/Application Support/toolshift` on macOS, `%LOCALAPPDATA%\toolshift` on Windows. Read
 * from `env` (not process.env) so a caller's environment decides; a relative XDG_DATA_HOME is ignored, as
 * the XDG Base Directory specification says.
 */
export function userDataDir(
  env: Record<string, string | undefined>,
  platform: NodeJS.Platform = process.platform,
): string {
  const home = env.HOME || os.homedir();
  if (platform === 'darwin') return path.join(home, 'Library', 'Application Support', 'toolshift');
  if (platform === 'win32')
    return path.join(env.LOCALAPPDATA || path.join(home, 'AppData', 'Local'), 'toolshift');
  const xdg = env.XDG_DATA_HOME;
  return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(home, '.local', 'share'), 'toolshift');
}

/**
 * A module beside the caller, for a worker or child process to load: `name` is its `.ts` file, run by Node's
 * type stripping from a checkout; from the built package (`dist/`, where Node does not strip types under
 * node_modules) the caller is a `.js` file and so is its sibling.
 */
export function siblingModule(callerUrl: string, name: string): URL {
  return new URL(callerUrl.endsWith('.js') ? name.replace(/\.ts$/, '.js') : name, callerUrl);
}

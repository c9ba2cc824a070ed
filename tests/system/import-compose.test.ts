import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../lib/config/config.ts';

// docker-compose.yml and the user's toolsets: the gateway container loads them from a mounted directory,
// the one `toolshift toolsets import` writes to when run in this checkout, apart from the shipped toolsets.

const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as {
  services: Record<string, { environment?: Record<string, string>; volumes?: Volume[] }>;
};

type Volume = string | { type: string; source: string; target: string; read_only?: boolean };

/** A host path as compose resolves it: `${VAR:-default}` from `env`, then a leading `~` as the home. */
function hostPath(source: string, env: Record<string, string | undefined>): string {
  const interpolated = source.replace(/\$\{(\w+):-([^}]*)\}/g, (_, name, fallback) => env[name] || fallback);
  return path.resolve(interpolated.replace(/^~(?=\/)/, homedir()));
}

describe('docker-compose.yml and the user toolsets', () => {
  it('mounts the directory the CLI imports into, writable, where the gateway reads USER_TOOLSETS_DIR', () => {
    const gateway = compose.services['mcp-gateway'];
    const inside = gateway.environment?.USER_TOOLSETS_DIR as string;
    expect(inside).toBeDefined();
    const mounts = (gateway.volumes ?? []).map((v) =>
      typeof v === 'string' ? v.split(':') : [v.source, v.target, v.read_only ? 'ro' : undefined],
    );
    const mount = mounts.find(([, target]) => target === inside);
    expect(mount).toBeDefined();
    const [source, , mode] = mount as string[];
    // The host side is the CLI's own default (the user's data directory's toolsets/, with or without
    // XDG_DATA_HOME), and the gateway may write it too (`docker compose exec mcp-gateway npx toolshift toolsets import …`).
    expect(hostPath(source, {})).toBe(loadConfig({ HOME: homedir() }).gateway.userToolsetsDir);
    expect(hostPath(source, { XDG_DATA_HOME: '/srv/xdg' })).toBe(
      loadConfig({ XDG_DATA_HOME: '/srv/xdg' }).gateway.userToolsetsDir,
    );
    expect(mode).toBeUndefined();
    // Not the shipped toolsets, which stay read-only.
    const shipped = mounts.find(([, target]) => target === gateway.environment?.TOOLSETS_DIR);
    expect(shipped?.[2]).toBe('ro');
    expect(hostPath(source, {})).not.toBe(path.resolve(shipped?.[0] as string));
  });
});

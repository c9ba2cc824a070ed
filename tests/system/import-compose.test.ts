import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../lib/config.ts';

// docker-compose.yml and the user's toolsets: the gateway container loads them from a mounted directory,
// the one `toolshift toolsets import` writes to when run in this checkout, apart from the shipped toolsets.

const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as {
  services: Record<string, { environment?: Record<string, string>; volumes?: string[] }>;
};

describe('docker-compose.yml and the user toolsets', () => {
  it('mounts the directory the CLI imports into, writable, where the gateway reads USER_TOOLSETS_DIR', () => {
    const gateway = compose.services['mcp-gateway'];
    const inside = gateway.environment?.USER_TOOLSETS_DIR as string;
    expect(inside).toBeDefined();
    const mounts = (gateway.volumes ?? []).map((v) => v.split(':'));
    const mount = mounts.find(([, target]) => target === inside);
    expect(mount).toBeDefined();
    const [source, , mode] = mount as string[];
    // The host side is the CLI's own default (./data/toolsets of the checkout), and the gateway may write it
    // too (`docker compose exec mcp-gateway npx toolshift toolsets import …`).
    expect(path.resolve(source)).toBe(loadConfig({}).gateway.userToolsetsDir);
    expect(mode).toBeUndefined();
    // Not the shipped toolsets, which stay read-only.
    const shipped = mounts.find(([, target]) => target === gateway.environment?.TOOLSETS_DIR);
    expect(shipped?.[2]).toBe('ro');
    expect(path.resolve(source)).not.toBe(path.resolve(shipped?.[0] as string));
  });
});

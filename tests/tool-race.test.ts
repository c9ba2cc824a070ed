import { mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../tool-server/path-guard.ts';
import { createRegistry } from '../tool-server/registry.ts';
import { RwLock } from '../tool-server/rw-lock.ts';
import { fileSystemTools } from '../tool-server/tools/file-system.ts';

let tmp: string;
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('concurrent tool calls', () => {
  it('cannot race a move against a write to land a file outside the roots', async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'race-'));
    const root = path.join(tmp, 'ws');
    const outside = path.join(tmp, 'outside');
    await mkdir(root);
    await mkdir(outside);
    const ctx = { paths: await PathGuard.create({ roots: [root], readOnlyRoots: [] }), maxReadBytes: 4096 };
    const registry = createRegistry(fileSystemTools);
    const n = 100;
    for (let i = 0; i < n; i++) {
      await mkdir(path.join(root, `links${i}`));
      await symlink(outside, path.join(root, `links${i}`, 'ext'));
    }
    // The write checks d{i}/ext/… while d{i} does not exist yet; the move then makes d{i}/ext a link outside.
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const write = registry.call('write_file', { path: `d${i}/ext/escaped${i}`, content: 'x' }, ctx);
        for (let k = 0; k < i % 5; k++) await new Promise((r) => setImmediate(r));
        const move = registry.call('move_file', { source: `links${i}`, destination: `d${i}` }, ctx);
        await Promise.all([write, move]);
      }),
    );
    expect(await readdir(outside)).toEqual([]);
  });

  it('runs readers together and a writer alone, in arrival order', async () => {
    const lock = new RwLock();
    const log: string[] = [];
    const task = (name: string, ms: number) => async () => {
      log.push(`${name}+`);
      await new Promise((r) => setTimeout(r, ms));
      log.push(`${name}-`);
    };
    await Promise.all([
      lock.read(task('r1', 20)),
      lock.read(task('r2', 5)),
      lock.write(task('w', 5)),
      lock.read(task('r3', 1)),
    ]);
    expect(log).toEqual(['r1+', 'r2+', 'r2-', 'r1-', 'w+', 'w-', 'r3+', 'r3-']);
  });
});

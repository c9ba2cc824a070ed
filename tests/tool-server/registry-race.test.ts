import { mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { PathGuard } from '../../tool-server/guards/paths/guard.ts';
import { RwLock } from '../../tool-server/guards/paths/rw-lock.ts';
import { defineTool } from '../../tool-server/kit/define.ts';
import { createRegistry } from '../../tool-server/registry.ts';
import { moveFile } from '../../tool-server/tools/files/manage.ts';
import { fileSystemTools } from '../../tool-server/tools/files/tools.ts';
import { writeFile } from '../../tool-server/tools/files/write.ts';

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

  it('needs no lock for that: the same race with the tools called directly writes nothing outside', async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'race-'));
    const root = path.join(tmp, 'ws');
    const outside = path.join(tmp, 'outside');
    await mkdir(root);
    await mkdir(outside);
    const paths = await PathGuard.create({ roots: [root], readOnlyRoots: [] });
    const ctx = { paths, maxReadBytes: 4096 };
    const n = 100;
    for (let i = 0; i < n; i++) {
      await mkdir(path.join(root, `links${i}`));
      await symlink(outside, path.join(root, `links${i}`, 'ext'));
    }
    const outcomes = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const write = writeFile.run({ path: `d${i}/ext/escaped${i}`, content: 'x' }, ctx).then(
          () => 'written',
          () => 'refused',
        );
        for (let k = 0; k < i % 5; k++) await new Promise((r) => setImmediate(r));
        await moveFile.run({ source: `links${i}`, destination: `d${i}` }, ctx).catch(() => undefined);
        return write;
      }),
    );
    expect(await readdir(outside)).toEqual([]);
    expect(outcomes).toHaveLength(n);
  });

  it('never makes a file write wait for a slow tool of another kind (web, git, database)', async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'race-'));
    const paths = await PathGuard.create({ roots: [tmp], readOnlyRoots: [] });
    let finish: () => void = () => undefined;
    const slow = defineTool({
      name: 'slow_lookup',
      description: 'A read-only tool that takes as long as the test wants',
      input: z.object({}),
      output: z.string(),
      annotations: { readOnlyHint: true, destructiveHint: false },
      execute: () =>
        new Promise<string>((r) => {
          finish = () => r('done');
        }),
    });
    const registry = createRegistry([...fileSystemTools, slow]);
    const ctx = { paths, maxReadBytes: 4096 };
    const pending = registry.call('slow_lookup', {}, ctx);
    const written = await registry.call('write_file', { path: 'a.txt', content: 'x' }, ctx);
    expect(written.success).toBe(true);
    expect(await readdir(tmp)).toEqual(['a.txt']);
    finish();
    expect((await pending).result).toBe('done');
  });

  it('lets file reads run while a file write holds the lock, and writes one at a time', async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'race-'));
    const paths = await PathGuard.create({ roots: [tmp], readOnlyRoots: [] });
    const log: string[] = [];
    let release: () => void = () => undefined;
    let started: () => void = () => undefined;
    const writeStarted = new Promise<void>((r) => {
      started = r;
    });
    const writing = paths.runFileTool(true, async () => {
      log.push('write+');
      started();
      await new Promise<void>((r) => {
        release = r;
      });
      log.push('write-');
    });
    await writeStarted;
    const reading = paths.runFileTool(false, async () => {
      log.push('read');
    });
    const second = paths.runFileTool(true, async () => {
      log.push('write 2');
    });
    if (paths.raceFree) {
      await reading; // it does not wait for the write that holds the lock
      expect(log).toEqual(['write+', 'read']);
    }
    release();
    await Promise.all([writing, reading, second]);
    expect(log.indexOf('write 2')).toBeGreaterThan(log.indexOf('write-')); // writes one at a time
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

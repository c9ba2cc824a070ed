import {
  link,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import type { ToolContext } from '../../../tool-server/kit/define.ts';
import { ToolError } from '../../../tool-server/kit/errors.ts';
import { fileSystemTools } from '../../../tool-server/tools/files/tools.ts';

// Issue 7's gaps against the reference filesystem server: ~ and Windows paths, NFC/NFD names, line
// endings in edit_file, read_media_file, and what a write through a link does.

let base: string;
let root: string;
let ctx: ToolContext;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'fs-gaps-')));
  root = path.join(base, 'root');
  ctx = {
    paths: await PathGuard.create({ roots: [root], readOnlyRoots: [], homeDir: path.join(root, 'home') }),
    maxReadBytes: 4096,
  };
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const at = (p: string) => path.join(root, p);

async function run(name: string, args: unknown, context: ToolContext = ctx): Promise<any> {
  const tool = fileSystemTools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.run(args, context);
}

async function fails(name: string, args: unknown, message: RegExp, context: ToolContext = ctx) {
  const err = await run(name, args, context).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  expect((err as Error).message).toMatch(message);
}

describe('~ and Windows paths', () => {
  it('expands ~/ to the home directory and checks it against the roots, never making a folder named ~', async () => {
    expect(await run('write_file', { path: '~/notes.txt', content: 'n' })).toMatchObject({
      path: at('home/notes.txt'),
      action: 'created',
    });
    expect((await run('read_text_file', { path: '~/notes.txt' })).content).toBe('n');
    expect((await run('list_directory', { path: '~' })).entries).toEqual([
      { name: 'notes.txt', type: 'file' },
    ]);
    const away = {
      ...ctx,
      paths: await PathGuard.create({ roots: [root], readOnlyRoots: [], homeDir: path.join(base, 'home') }),
    };
    await fails(
      'write_file',
      { path: '~/x.txt', content: 'x' },
      /home\/x\.txt is outside the allowed directories/,
      away,
    );
    await fails('create_directory', { path: '~' }, /is outside the allowed directories/, away);
    expect(await readdir(root)).toEqual(['home']);
  });

  it('refuses C:\\…, C:/… and \\\\server\\… paths saying what a path here looks like', async () => {
    for (const p of ['C:\\Users\\me\\notes.txt', 'C:/Users/me/notes.txt', '\\\\server\\share\\notes.txt']) {
      await fails(
        'write_file',
        { path: p, content: 'x' },
        /is a Windows path; this server takes POSIX paths/,
      );
      await fails('read_text_file', { path: p }, /is a Windows path/);
      await fails('create_directory', { path: p }, /is a Windows path/);
    }
    expect(await readdir(root)).toEqual([]);
  });
});

describe('names that differ only in Unicode normalisation', () => {
  const composed = 'r\u00e9sum\u00e9.txt'; // NFC, as macOS keyboards and most editors type it
  const decomposed = 're\u0301sume\u0301.txt'; // NFD, as some file systems and tools store it

  for (const [onDisk, typed] of [
    [composed, decomposed],
    [decomposed, composed],
  ]) {
    it(`reads, edits and overwrites the existing file (${onDisk === composed ? 'NFC on disk' : 'NFD on disk'})`, async () => {
      await writeFile(at(onDisk), 'one\n');
      const read = await run('read_text_file', { path: typed });
      expect(read).toMatchObject({ path: at(onDisk), content: 'one\n' });
      await run('edit_file', { path: typed, edits: [{ old_text: 'one', new_text: 'two' }] });
      expect(await readFile(at(onDisk), 'utf8')).toBe('two\n');
      expect(await run('write_file', { path: typed, content: 'three\n' })).toMatchObject({
        path: at(onDisk),
        action: 'overwritten',
      });
      expect(await readdir(root)).toEqual([onDisk]); // no look-alike twin
      expect(await readFile(at(onDisk), 'utf8')).toBe('three\n');
      expect(await run('move_file', { source: typed, destination: 'moved.txt' })).toMatchObject({
        source: at(onDisk),
      });
      expect(await readdir(root)).toEqual(['moved.txt']);
    });
  }

  it('finds a directory by the other form too, and deletes the existing entry', async () => {
    await mkdir(at('caf\u00e9'));
    expect(await run('write_file', { path: 'cafe\u0301/menu.txt', content: 'm' })).toMatchObject({
      path: at('caf\u00e9/menu.txt'),
    });
    expect(await run('delete_file', { path: 'cafe\u0301/menu.txt' })).toMatchObject({ deleted: true });
    expect(await readdir(root)).toEqual(['caf\u00e9']);
    expect(await readdir(at('caf\u00e9'))).toEqual([]);
  });
});

describe('edit_file and line endings', () => {
  it('matches CRLF old_text in an LF file and keeps LF', async () => {
    await writeFile(at('lf.txt'), 'alpha\nbeta\ngamma\n');
    const r = await run('edit_file', {
      path: 'lf.txt',
      edits: [{ old_text: 'alpha\r\nbeta', new_text: 'ALPHA\r\nBETA\r\nextra' }],
    });
    expect(r.changed).toBe(true);
    expect(await readFile(at('lf.txt'), 'utf8')).toBe('ALPHA\nBETA\nextra\ngamma\n');
  });

  it('matches LF old_text in a CRLF file and keeps CRLF, also in a dry run diff', async () => {
    await writeFile(at('crlf.txt'), 'alpha\r\nbeta\r\n');
    const dry = await run('edit_file', {
      path: 'crlf.txt',
      edits: [{ old_text: 'alpha\nbeta', new_text: 'one\ntwo' }],
      dry_run: true,
    });
    expect(dry.diff).toContain('+one\r\n+two');
    await run('edit_file', { path: 'crlf.txt', edits: [{ old_text: 'alpha\nbeta', new_text: 'one\ntwo' }] });
    expect(await readFile(at('crlf.txt'), 'utf8')).toBe('one\r\ntwo\r\n');
  });

  it('in a file with mixed endings matches either form and leaves the other lines alone', async () => {
    await writeFile(at('mixed.txt'), 'a\r\nb\nc\r\n');
    await run('edit_file', { path: 'mixed.txt', edits: [{ old_text: 'a\nb', new_text: 'x\ny' }] });
    expect(await readFile(at('mixed.txt'), 'utf8')).toBe('x\r\ny\nc\r\n');
    await fails(
      'edit_file',
      { path: 'mixed.txt', edits: [{ old_text: 'q\nr', new_text: 'z' }] },
      /old_text was not found/,
    );
  });
});

const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.from('0000000dIHDR', 'latin1'),
]);
const MEDIA: [string, Buffer, string, string][] = [
  ['pic.png', PNG, 'image', 'image/png'],
  ['pic.jpg', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46]), 'image', 'image/jpeg'],
  ['anim.gif', Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1'), 'image', 'image/gif'],
  ['pic.webp', Buffer.from('RIFF\x10\x00\x00\x00WEBPVP8 ', 'latin1'), 'image', 'image/webp'],
  [
    'logo.svg',
    Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>'),
    'image',
    'image/svg+xml',
  ],
  ['sound.wav', Buffer.from('RIFF\x24\x00\x00\x00WAVEfmt ', 'latin1'), 'audio', 'audio/wav'],
  ['song.mp3', Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00', 'latin1'), 'audio', 'audio/mpeg'],
  ['frame.mp3', Buffer.from([0xff, 0xfb, 0x90, 0x64, 0, 0, 0, 0]), 'audio', 'audio/mpeg'],
  ['voice.ogg', Buffer.from('OggS\x00\x02\x00\x00', 'latin1'), 'audio', 'audio/ogg'],
  ['track.flac', Buffer.from('fLaC\x00\x00\x00\x22', 'latin1'), 'audio', 'audio/flac'],
];

describe('read_media_file', () => {
  it.each(MEDIA)('returns %s as base64 with its MIME type', async (name, bytes, kind, mime) => {
    await writeFile(at(name), bytes);
    const r = await run('read_media_file', { path: name });
    expect(r).toMatchObject({
      path: at(name),
      type: kind,
      mime_type: mime,
      size_bytes: bytes.length,
      encoding: 'base64',
      max_bytes: 5 * 1024 * 1024,
    });
    expect(Buffer.from(r.data, 'base64')).toEqual(bytes);
  });

  it('goes by content, not by name', async () => {
    await writeFile(at('really-a-png.jpg'), PNG);
    expect((await run('read_media_file', { path: 'really-a-png.jpg' })).mime_type).toBe('image/png');
    await writeFile(at('not-svg.svg'), 'just text');
    await fails(
      'read_media_file',
      { path: 'not-svg.svg' },
      /is not an image or audio file .*use read_text_file/,
    );
  });

  it('refuses a file over the cap instead of cutting it, and says the cap', async () => {
    await writeFile(at('big.png'), Buffer.concat([PNG, Buffer.alloc(100)]));
    const small = { ...ctx, maxMediaBytes: 64 };
    await fails(
      'read_media_file',
      { path: 'big.png' },
      /is 120 bytes; read_media_file returns files up to 64 bytes/,
      small,
    );
    await writeFile(at('fits.png'), PNG);
    expect(await run('read_media_file', { path: 'fits.png' }, small)).toMatchObject({
      max_bytes: 64,
      size_bytes: 20,
    });
  });

  it('refuses text, directories and paths outside the roots', async () => {
    await writeFile(at('notes.txt'), 'hello');
    await mkdir(at('dir'));
    await fails('read_media_file', { path: 'notes.txt' }, /is not an image or audio file/);
    await fails('read_media_file', { path: 'dir' }, /is a directory, not a file/);
    await fails('read_media_file', { path: '/etc/hostname' }, /is outside the allowed directories/);
  });
});

describe('writes and links, as docs/toolsets.md says', () => {
  it('a write through a symlink inside the roots writes its target and the link stays', async () => {
    await writeFile(at('target.txt'), 'old');
    await symlink('target.txt', at('alias.txt'));
    expect(await run('write_file', { path: 'alias.txt', content: 'new' })).toMatchObject({
      path: at('target.txt'),
      action: 'overwritten',
    });
    await run('edit_file', { path: 'alias.txt', edits: [{ old_text: 'new', new_text: 'edited' }] });
    expect(await readFile(at('target.txt'), 'utf8')).toBe('edited');
    expect(await readlink(at('alias.txt'))).toBe('target.txt');
  });

  it('a link that leaves the roots is refused; a hard link is replaced, its other names untouched', async () => {
    const outsideFile = path.join(base, 'outside.txt');
    await writeFile(outsideFile, 'outside');
    await symlink(outsideFile, at('out.txt'));
    await fails('write_file', { path: 'out.txt', content: 'x' }, /is outside the allowed directories/);
    await link(outsideFile, at('hard.txt'));
    await run('write_file', { path: 'hard.txt', content: 'mine' });
    expect(await readFile(outsideFile, 'utf8')).toBe('outside');
    expect((await lstat(at('hard.txt'))).nlink).toBe(1);
  });
});

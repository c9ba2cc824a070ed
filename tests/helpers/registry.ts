import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

// A package registry on loopback, like a private mirror: it holds what is published to it and the versions the
// published package's npm-shrinkwrap.json pins, and nothing else. `npm publish` PUTs a package document with
// the tarball attached; `npm install` GETs documents and tarballs. Like a public registry it marks a version
// whose tarball carries npm-shrinkwrap.json (`_hasShrinkwrap`), which is what makes npm install the
// shrinkwrapped tree. The pinned versions' documents are made from the shrinkwrap (a lockfile written without
// registry URLs makes npm ask for them); their tarballs come from the local npm cache, found by integrity.
// Every other name answers 404, so an install that needs anything else fails instead of reaching a network.

interface Published {
  doc: {
    name: string;
    'dist-tags': Record<string, string>;
    versions: Record<string, Record<string, unknown>>;
  };
  tarballs: Map<string, Buffer>;
}

/** The package/npm-shrinkwrap.json of a .tgz (read with the system's tar), or undefined. */
function shrinkwrapOf(tgz: Buffer): Shrinkwrap | undefined {
  const read = spawnSync('tar', ['-xzOf', '-', 'package/npm-shrinkwrap.json'], {
    input: tgz,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return read.status === 0 ? (JSON.parse(read.stdout) as Shrinkwrap) : undefined;
}

interface Shrinkwrap {
  packages: Record<
    string,
    Record<string, unknown> & { version?: string; integrity?: string; link?: boolean }
  >;
}

/** Where npm's cache keeps a tarball of this integrity (cacache's content-addressed layout). */
function cachedTarball(cacheDir: string, integrity: string): string | undefined {
  const sha512 = /^sha512-(.+)$/.exec(integrity)?.[1];
  if (!sha512) return undefined;
  const hex = Buffer.from(sha512, 'base64').toString('hex');
  const file = path.join(
    cacheDir,
    '_cacache',
    'content-v2',
    'sha512',
    hex.slice(0, 2),
    hex.slice(2, 4),
    hex.slice(4),
  );
  return existsSync(file) ? file : undefined;
}

/**
 * The packages a user's install of `lockfile`'s package needs (its non-dev entries) whose tarballs npm's cache
 * does not hold, as name@version: what this registry could not serve.
 */
export function uncachedPins(npmCache: string, lockfile: string): string[] {
  const lock = JSON.parse(readFileSync(lockfile, 'utf8')) as Shrinkwrap;
  return Object.entries(lock.packages)
    .filter(([where, e]) => where !== '' && !e.link && !e.dev && e.version && e.integrity)
    .filter(([, e]) => !cachedTarball(npmCache, e.integrity as string))
    .map(
      ([where, e]) =>
        `${where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length)}@${e.version}`,
    );
}

/** `npmCache`: npm's cache directory (`npm config get cache`), where the pinned versions' tarballs are. */
export async function startRegistry(npmCache: string) {
  const packages = new Map<string, Published>();
  /** Tarballs of pinned versions, by URL path: the file in the npm cache. */
  const pinnedTarballs = new Map<string, string>();
  let url = '';

  /** Makes a document for each version the shrinkwrap pins, from its entry (dependencies, bin, engines …). */
  const mirror = (shrinkwrap: Shrinkwrap) => {
    for (const [where, entry] of Object.entries(shrinkwrap.packages)) {
      if (where === '' || entry.link || !entry.version || !entry.integrity) continue;
      const name = where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length);
      const file = `${name.split('/').at(-1)}-${entry.version}.tgz`;
      const cached = cachedTarball(npmCache, entry.integrity);
      if (cached) pinnedTarballs.set(`/${name}/-/${file}`, cached);
      const {
        resolved: _r,
        dev: _d,
        optional: _o,
        peer: _p,
        devOptional: _do,
        inBundle: _b,
        ...manifest
      } = entry;
      const doc = packages.get(name)?.doc ?? { name, 'dist-tags': {}, versions: {} };
      doc.versions[entry.version] = {
        ...manifest,
        name,
        dist: { tarball: `${url}/${name}/-/${file}`, integrity: entry.integrity },
      };
      doc['dist-tags'].latest ??= entry.version;
      if (!packages.has(name)) packages.set(name, { doc, tarballs: new Map() });
    }
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const urlPath = decodeURIComponent((req.url ?? '/').split('?')[0]);
      const send = (status: number, body: unknown, type = 'application/json') => {
        res.writeHead(status, { 'content-type': type });
        res.end(Buffer.isBuffer(body) ? body : JSON.stringify(body));
      };
      if (req.method === 'PUT') {
        const name = urlPath.slice(1);
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          versions: Record<string, Record<string, unknown>>;
          'dist-tags': Record<string, string>;
          _attachments: Record<string, { data: string }>;
        };
        const entry = packages.get(name) ?? {
          doc: { name, 'dist-tags': {}, versions: {} },
          tarballs: new Map<string, Buffer>(),
        };
        for (const [file, attachment] of Object.entries(body._attachments)) {
          const tgz = Buffer.from(attachment.data, 'base64');
          entry.tarballs.set(file.split('/').at(-1) as string, tgz);
          for (const [version, manifest] of Object.entries(body.versions)) {
            const tarball = `${url}/${name}/-/${file.split('/').at(-1)}`;
            const integrity = `sha512-${createHash('sha512').update(tgz).digest('base64')}`;
            const shasum = createHash('sha1').update(tgz).digest('hex');
            const shrinkwrap = shrinkwrapOf(tgz);
            if (shrinkwrap) mirror(shrinkwrap);
            entry.doc.versions[version] = {
              ...manifest,
              _hasShrinkwrap: shrinkwrap !== undefined,
              dist: { tarball, integrity, shasum },
            };
          }
        }
        Object.assign(entry.doc['dist-tags'], body['dist-tags']);
        packages.set(name, entry);
        return send(201, { ok: true });
      }
      const tarball = /^\/(.+)\/-\/([^/]+\.tgz)$/.exec(urlPath);
      if (tarball) {
        const pinned = pinnedTarballs.get(urlPath);
        const tgz = pinned ? readFileSync(pinned) : packages.get(tarball[1])?.tarballs.get(tarball[2]);
        return tgz
          ? send(200, tgz, 'application/octet-stream')
          : send(404, {
              error: `${urlPath.slice(1)} is not in npm's cache (${npmCache}), and this registry has no other copy`,
            });
      }
      const doc = packages.get(urlPath.slice(1))?.doc;
      return doc ? send(200, doc) : send(404, { error: `${urlPath.slice(1)} is not in this registry` });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    /** The versions published so far, by package name. */
    published: (name: string) => Object.keys(packages.get(name)?.doc.versions ?? {}),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

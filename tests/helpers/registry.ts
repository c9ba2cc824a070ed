import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// A package registry on loopback that holds what is published to it and nothing else: `npm publish` PUTs a
// package document with the tarball attached; `npm install` GETs the document and the tarball. Like a public
// registry it marks a version whose tarball carries npm-shrinkwrap.json (`_hasShrinkwrap`), which is what
// makes npm install the shrinkwrapped tree. Every other name answers 404, so an install that needs anything
// beyond its shrinkwrap and the local npm cache fails instead of reaching a network.

interface Published {
  doc: {
    name: string;
    'dist-tags': Record<string, string>;
    versions: Record<string, Record<string, unknown>>;
  };
  tarballs: Map<string, Buffer>;
}

/** Whether a .tgz holds package/npm-shrinkwrap.json (listed with the system's tar). */
function hasShrinkwrap(tgz: Buffer): boolean {
  const listed = spawnSync('tar', ['-tzf', '-'], {
    input: tgz,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return listed.stdout.split('\n').includes('package/npm-shrinkwrap.json');
}

export async function startRegistry() {
  const packages = new Map<string, Published>();
  let url = '';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = decodeURIComponent((req.url ?? '/').split('?')[0]);
      const send = (status: number, body: unknown, type = 'application/json') => {
        res.writeHead(status, { 'content-type': type });
        res.end(Buffer.isBuffer(body) ? body : JSON.stringify(body));
      };
      if (req.method === 'PUT') {
        const name = path.slice(1);
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
            entry.doc.versions[version] = {
              ...manifest,
              _hasShrinkwrap: hasShrinkwrap(tgz),
              dist: { tarball, integrity, shasum },
            };
          }
        }
        Object.assign(entry.doc['dist-tags'], body['dist-tags']);
        packages.set(name, entry);
        return send(201, { ok: true });
      }
      const tarball = /^\/(.+)\/-\/([^/]+\.tgz)$/.exec(path);
      if (tarball) {
        const tgz = packages.get(tarball[1])?.tarballs.get(tarball[2]);
        return tgz ? send(200, tgz, 'application/octet-stream') : send(404, { error: 'not found' });
      }
      const doc = packages.get(path.slice(1))?.doc;
      return doc ? send(200, doc) : send(404, { error: `${path.slice(1)} is not in this registry` });
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

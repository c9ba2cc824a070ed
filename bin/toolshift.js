#!/usr/bin/env node
// The `toolshift` command (package.json "bin"; `npm start` is `toolshift serve`). Plain JavaScript, so any Node
// can read it and say which Node toolshift needs, in one line, instead of failing on the first TypeScript
// file. From a checkout it runs the TypeScript sources with Node's type stripping; from the package (where
// Node will not strip types under node_modules) the JavaScript that `npm pack` built into dist/.
import { existsSync } from 'node:fs';

const [major, minor] = process.versions.node.split('.').map(Number);
// The maintained lines: 22 from 22.18 (type stripping on by default), 24, and 26 onwards.
if (!((major === 22 && minor >= 18) || major === 24 || major >= 26)) {
  process.stderr.write(
    `toolshift needs Node.js 22.18 or newer on the 22 line, 24, or 26 and later; this is Node ${process.versions.node}\n`,
  );
  process.exit(1);
}
const source = new URL('../start/entry.ts', import.meta.url);
await import(existsSync(source) ? source.href : new URL('../dist/start/entry.js', import.meta.url).href);

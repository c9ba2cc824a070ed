import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, rmSync } from 'node:fs';

// `npm pack` / `npm publish` hooks (package.json prepack and postpack). Before: build dist/ (the JavaScript the
// installed package runs) and ship the lockfile as npm-shrinkwrap.json, so `npm i -g toolshift` installs the
// dependency tree the tests ran against, not whatever the ranges resolve to that day. After: remove both, so
// a checkout keeps running its TypeScript sources.

const step = process.argv[2];
if (step === 'before') {
  rmSync('dist', { recursive: true, force: true });
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], {
    stdio: 'inherit',
  });
  // The console's stylesheet, script and icon are served as they are, beside the compiled routes.
  cpSync('agent-server/console/assets', 'dist/agent-server/console/assets', { recursive: true });
  copyFileSync('package-lock.json', 'npm-shrinkwrap.json');
} else if (step === 'after') {
  rmSync('dist', { recursive: true, force: true });
  rmSync('npm-shrinkwrap.json', { force: true });
} else {
  process.stderr.write('usage: node scripts/pack.ts before|after\n');
  process.exit(2);
}

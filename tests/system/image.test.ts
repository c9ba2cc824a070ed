import { readFileSync } from 'node:fs';
import path from 'node:path';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { importClosure } from '../helpers/import-closure.ts';

// The Dockerfile, read (no Docker engine runs here): the image must hold every module its entry point loads,
// the files read at run time, and only production dependencies; it runs as a user, with git, on the Node line CI
// tests as the current one. The import closure is derived from the code, so a new module can never be left out
// of the image again: removing any COPY line of code makes this test name what went missing.

const ROOT = process.cwd();
/** What the image runs: bin/toolshift.js (CMD, and every compose service's command). */
const ENTRY = 'bin/toolshift.js';
/** Read at run time by path, not imported: the installation's manifest (lib/config/installation.ts), toolsets, prompts. */
const RUNTIME_FILES = ['package.json', 'toolsets/policy.yaml', 'toolsets/file_system_tools.yaml', 'prompts'];

interface Instruction {
  keyword: string;
  args: string;
  stage: number;
}

/** The Dockerfile's instructions (continuations joined, comments dropped), each with the stage it is in. */
function instructions(text: string): Instruction[] {
  const joined = text
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ');
  let stage = -1;
  return joined
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [keyword, ...rest] = l.trim().split(/\s+/);
      if (keyword.toUpperCase() === 'FROM') stage += 1;
      return { keyword: keyword.toUpperCase(), args: rest.join(' '), stage };
    });
}

/** The final stage's COPY sources from the build context (a `--from` copy is another stage's output). */
function copiedSources(list: Instruction[]): string[] {
  const last = Math.max(...list.map((i) => i.stage));
  return list
    .filter((i) => i.stage === last && i.keyword === 'COPY' && !/--from=/.test(i.args))
    .flatMap((i) => {
      const parts = i.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      return parts.slice(0, -1).map((p) => p.replace(/^\.\//, '').replace(/\/$/, ''));
    });
}

/** The files of `wanted` that no COPY source covers, or that .dockerignore keeps out of the build context. */
function missing(dockerfile: string, wanted: readonly string[]): string[] {
  const sources = copiedSources(instructions(dockerfile));
  const ignore = readFileSync('.dockerignore', 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const ignored = picomatch(ignore.flatMap((p) => [p, `${p}/**`]));
  return wanted.filter(
    (file) => ignored(file) || !sources.some((s) => s === '.' || file === s || file.startsWith(`${s}/`)),
  );
}

const dockerfile = readFileSync('Dockerfile', 'utf8');
const closure = importClosure(ROOT, [ENTRY]);

describe('the image (Dockerfile)', () => {
  it('copies every module the entry point loads, and the files read at run time', () => {
    // The closure reaches the daemon, each service alone, the worker threads and processes, and the CLI.
    for (const file of [
      'start/start.ts',
      'start/service-thread.ts',
      'agent-server/main.ts',
      'mcp-gateway/main.ts',
      'tool-server/main.ts',
      'tool-server/tools/web/html-worker.ts',
      'tool-server/tools/database/worker.ts',
      'client.ts',
    ])
      expect(closure.files).toContain(file);
    expect(missing(dockerfile, [...closure.files, ...RUNTIME_FILES])).toEqual([]);
  });

  it('names what went missing when any COPY line of code is removed', () => {
    const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    const copyLines = finalStage.split('\n').filter((l) => /^COPY (?!--from)/.test(l));
    const needed = copyLines.filter((line) => {
      const without = dockerfile.replace(`${line}\n`, '');
      return missing(without, [...closure.files, ...RUNTIME_FILES]).length > 0;
    });
    // Every COPY of the build context carries something the image needs: each one's removal is caught.
    expect(needed).toEqual(copyLines);
    const withoutLib = dockerfile.replace('COPY lib ./lib\n', '');
    expect(missing(withoutLib, closure.files)).toContain('lib/config/config.ts');
  });

  it('installs only production dependencies, and every package the code imports is one', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const notProduction = [...closure.packages].filter(([name]) => !(name in pkg.dependencies));
    expect(notProduction.map(([name, file]) => `${name} (imported by ${file})`)).toEqual([]);
    expect(dockerfile).toMatch(/^RUN npm ci --omit=dev\b/m);
  });

  it('is multi-stage on the current LTS slim image, with git, a non-root user, volumes and a health check', () => {
    const list = instructions(dockerfile);
    const froms = list.filter((i) => i.keyword === 'FROM');
    expect(froms.length).toBeGreaterThanOrEqual(2);
    // The final base is the newest Node line the tests run on (scripts/node-line.sh, CI).
    const lines = [...readFileSync('scripts/node-line.sh', 'utf8').matchAll(/^\s+(\d+)\) version=/gm)].map(
      (m) => Number(m[1]),
    );
    const current = Math.max(...lines);
    expect(froms.at(-1)?.args).toBe(`node:${current}-slim`);
    const final = list.filter((i) => i.stage === froms.length - 1);
    // The compilers stay in the first stage; the final one gets git (git_tools).
    const installs = final.filter((i) => i.keyword === 'RUN' && /apt-get install/.test(i.args));
    expect(installs.some((i) => /\bgit\b/.test(i.args))).toBe(true);
    expect(installs.some((i) => /\bg\+\+|\bmake\b/.test(i.args))).toBe(false);
    const user = final.filter((i) => i.keyword === 'USER').at(-1)?.args;
    expect(user).toBeDefined();
    expect(['root', '0']).not.toContain(user);
    const volumes = final.filter((i) => i.keyword === 'VOLUME').map((i) => i.args);
    expect(volumes.join(' ')).toMatch(/"\/data"/);
    expect(volumes.join(' ')).toMatch(/"\/workspace"/);
    const env = final
      .filter((i) => i.keyword === 'ENV')
      .map((i) => i.args)
      .join(' ');
    expect(env).toMatch(/TOOLSHIFT_DATA_DIR=\/data/);
    expect(env).toMatch(/FS_ROOTS=\/workspace/);
    expect(final.some((i) => i.keyword === 'HEALTHCHECK' && /CMD .*\/health/.test(i.args))).toBe(true);
    expect(final.find((i) => i.keyword === 'CMD')?.args).toBe('["node", "bin/toolshift.js", "serve"]');
  });

  it('runs each compose service through the same entry point', () => {
    const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as {
      services: Record<string, { command?: string[]; build?: string }>;
    };
    const built = Object.entries(compose.services).filter(([, s]) => s.build === '.');
    // The three services, and the `scale` profile's gateways, agent API and workers.
    expect(built.map(([name]) => name).sort()).toEqual(
      [
        'agent-server',
        'mcp-gateway',
        'tool-server',
        'gateway-1',
        'gateway-2',
        'agent-api',
        'worker-1',
        'worker-2',
      ].sort(),
    );
    for (const [name, s] of built)
      expect(s.command?.slice(0, 3), name).toEqual(['node', path.normalize(ENTRY), 'serve']);
  });
});

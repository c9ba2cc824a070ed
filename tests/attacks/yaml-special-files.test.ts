import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// Attack on issue 32 item 6 ("no file can stop the start": every parse of toolsets, policy, prompts, imports
// is that file's error, skipped and named). lib/config/yaml-file.ts bounds a file by statSync().size and then
// readFileSync()s it. A FIFO (or a symlink to one) reports size 0 and readFileSync blocks the whole process
// until a writer appears: a named pipe dropped in the toolsets folder, as POLICY_FILE, or in the prompts
// folder makes the gateway's load (start, or a reload on the event loop) hang forever instead of being
// skipped and named. The load runs in a child process so the test itself cannot hang; green = it finished.

const REPO = path.resolve(import.meta.dirname, '../..');
const tmp = mkdtempSync(path.join(tmpdir(), 'toolshift-fifo-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const TOOLSET = `id: notes
description: Notes.
backend: tool-server
tools: [read_text_file]
`;

/** Runs `code` (an ES module body) in a child Node; resolves to how it ended within `ms`. */
function runChild(code: string, ms: number): Promise<{ finished: boolean; stdout: string; stderr: string }> {
  const file = path.join(tmp, `child-${Math.random().toString(36).slice(2)}.mts`);
  writeFileSync(file, code);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve({ finished: false, stdout, stderr });
    }, ms);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve({ finished: true, stdout, stderr });
    });
  });
}

function fifo(at: string): void {
  const r = spawnSync('mkfifo', [at]);
  if (r.status !== 0) throw new Error(`mkfifo failed: ${r.stderr}`);
}

describe('a named pipe where a YAML file is expected', () => {
  it('control: the same child load with a broken regular file finishes and names it', async () => {
    const shipped = path.join(tmp, 'shipped-control');
    const user = path.join(tmp, 'user-control');
    mkdirSync(shipped);
    mkdirSync(user);
    writeFileSync(path.join(shipped, 'notes.yaml'), TOOLSET);
    writeFileSync(path.join(user, 'evil.yaml'), 'a: [\n');
    const res = await runChild(
      `import { loadToolsets } from '${REPO}/mcp-gateway/catalog/toolset-files.ts';
       const r = loadToolsets({ dir: ${JSON.stringify(shipped)}, userDir: ${JSON.stringify(user)} }, {});
       console.log(JSON.stringify(r.warnings));`,
      8_000,
    );
    expect(res.finished, res.stderr).toBe(true);
    expect(res.stdout, res.stderr).toContain('evil.yaml');
  }, 20_000);

  it('in the user toolsets folder: the load finishes and names the file', async () => {
    const shipped = path.join(tmp, 'shipped');
    const user = path.join(tmp, 'user');
    mkdirSync(shipped);
    mkdirSync(user);
    writeFileSync(path.join(shipped, 'notes.yaml'), TOOLSET);
    fifo(path.join(user, 'evil.yaml'));
    const res = await runChild(
      `import { loadToolsets } from '${REPO}/mcp-gateway/catalog/toolset-files.ts';
       const r = loadToolsets({ dir: ${JSON.stringify(shipped)}, userDir: ${JSON.stringify(user)} }, {});
       console.log(JSON.stringify(r.warnings));`,
      8_000,
    );
    expect(
      res.finished,
      'loadToolsets hung reading a FIFO (the gateway start / reload blocks for good)',
    ).toBe(true);
    expect(res.stdout).toContain('evil.yaml');
  }, 20_000);

  it('as POLICY_FILE: the load finishes (fails closed, names the file)', async () => {
    const policy = path.join(tmp, 'policy-fifo.yaml');
    fifo(policy);
    const res = await runChild(
      `import { loadPolicy } from '${REPO}/mcp-gateway/ceiling/policy.ts';
       try { loadPolicy(${JSON.stringify(policy)}); console.log('loaded'); } catch (e) { console.log('refused', e.message); }`,
      8_000,
    );
    expect(res.finished, 'loadPolicy hung reading a FIFO').toBe(true);
  }, 20_000);

  it('in the prompts folder: the load finishes and names the file', async () => {
    const prompts = path.join(tmp, 'prompts');
    mkdirSync(prompts);
    fifo(path.join(prompts, 'evil.yaml'));
    const res = await runChild(
      `import { loadPlaybooks } from '${REPO}/mcp-gateway/catalog/prompts.ts';
       const r = loadPlaybooks(${JSON.stringify(prompts)});
       console.log(JSON.stringify(r.warnings));`,
      8_000,
    );
    expect(res.finished, 'loadPlaybooks hung reading a FIFO').toBe(true);
    expect(res.stdout).toContain('evil.yaml');
  }, 20_000);
});

import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// The process-level handler every service's main script installs (lib/http/run-service.ts): a promise rejected
// with nothing to handle it is logged, and the process goes on serving. Node's default ends the process.

const RUN_SERVICE = path.resolve('lib/http/run-service.ts');

/**
 * Runs a script that rejects a promise nobody handles, then answers once more from a timer: Node deals with the
 * rejection before any timer runs, so the answer shows the process went on past it.
 */
function run(withHandler: boolean): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = `
    ${
      withHandler
        ? `const { keepRunningOnUnhandledRejection } = await import(${JSON.stringify(RUN_SERVICE)});
    keepRunningOnUnhandledRejection('test-service');`
        : ''
    }
    Promise.reject(new Error('the database went away'));
    setTimeout(() => process.stdout.write('still serving\\n'), 20);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'pipe' });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c;
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('an unhandled rejection', () => {
  it('is logged with its stack, and the process goes on', async () => {
    const { code, stdout, stderr } = await run(true);
    expect(stdout).toBe('still serving\n');
    expect(code).toBe(0);
    const line = JSON.parse(stderr.trim());
    expect(line).toMatchObject({
      level: 50,
      name: 'test-service',
      msg: 'a promise was rejected and nothing handled it; the process goes on',
      err: { type: 'Error', message: 'the database went away' },
    });
    expect(line.err.stack).toContain('the database went away');
  });

  it('ends the process without the handler (what it prevents)', async () => {
    const { code, stdout, stderr } = await run(false);
    expect(stdout).toBe('');
    expect(code).not.toBe(0);
    expect(stderr).toContain('the database went away');
  });
});

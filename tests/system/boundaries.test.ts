import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findBoundaryViolations } from '../../scripts/check-boundaries.ts';

describe('service boundaries', () => {
  it('holds in this repository', () => {
    expect(findBoundaryViolations(process.cwd())).toEqual([]);
  });

  it('catches a service importing another service’s internals, a contract importing code, and lib importing a service', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'bounds-'));
    for (const d of ['agent-server', 'mcp-gateway/core', 'tool-server', 'lib']) {
      await mkdir(path.join(root, d), { recursive: true });
    }
    await writeFile(
      path.join(root, 'tool-server/contract.ts'),
      "import { z } from 'zod';\nexport const A = z.string();\n",
    );
    await writeFile(path.join(root, 'tool-server/registry.ts'), 'export const r = 1;\n');
    await writeFile(
      path.join(root, 'mcp-gateway/core/gateway.ts'),
      "import { A } from '../../tool-server/contract.ts';\nimport { r } from '../../tool-server/registry.ts';\n",
    );
    await writeFile(path.join(root, 'agent-server/contract.ts'), "import { log } from '../lib/log.ts';\n");
    await writeFile(
      path.join(root, 'lib/x.ts'),
      "const m = await import('../mcp-gateway/core/gateway.ts');\n",
    );
    expect(findBoundaryViolations(root).sort()).toEqual([
      'agent-server/contract.ts: imports ../lib/log.ts (a contract imports only zod and other contracts)',
      'lib/x.ts: imports ../mcp-gateway/core/gateway.ts (lib/ must not depend on a service)',
      'mcp-gateway/core/gateway.ts: imports ../../tool-server/registry.ts (only tool-server/contract.ts may be imported from another service)',
    ]);
  });

  it('catches an import circle anywhere in the code, type-only imports included, and the CLI reaching past a contract', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'circles-'));
    for (const d of ['tool-server/kit', 'tool-server/tools/git', 'cli', 'bench', 'lib']) {
      await mkdir(path.join(root, d), { recursive: true });
    }
    const file = (name: string, text: string) => writeFile(path.join(root, name), `${text}\n`);
    await file('tool-server/kit/define.ts', "import type { G } from '../tools/git/run.ts';");
    await file('tool-server/tools/git/run.ts', "import { d } from '../../kit/define.ts';");
    await file('bench/a.ts', "export * from './b.ts';");
    await file('bench/b.ts', "const a = await import('./a.ts');");
    await file('lib/self.ts', "import { x } from './self.ts';");
    await file('start.ts', "import { s } from './lib/self.ts';");
    await file('cli/run.ts', "import { r } from '../tool-server/registry.ts';");
    const advice = '(move what they share into a file both import)';
    expect(findBoundaryViolations(root).sort()).toEqual([
      'cli/run.ts: imports ../tool-server/registry.ts (the CLI reaches a service through its contract.ts and HTTP)',
      `import circle: bench/a.ts -> bench/b.ts -> bench/a.ts ${advice}`,
      `import circle: lib/self.ts -> lib/self.ts ${advice}`,
      `import circle: tool-server/kit/define.ts -> tool-server/tools/git/run.ts -> tool-server/kit/define.ts ${advice}`,
      'tool-server/kit/define.ts: imports ../tools/git/run.ts (tool-server: kit/ stands below tools/ and imports nothing of it)',
    ]);
  });

  it('catches an import that runs back up a service’s floors or sideways on one, and a file on no floor', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'floors-'));
    for (const d of [
      'agent-server/loop',
      'agent-server/tasks',
      'agent-server/store',
      'agent-server/clients',
    ]) {
      await mkdir(path.join(root, d), { recursive: true });
    }
    await mkdir(path.join(root, 'agent-server/attic'));
    const file = (name: string, text: string) => writeFile(path.join(root, name), `${text}\n`);
    await file('agent-server/errors.ts', 'export class AgentError extends Error {}');
    await file('agent-server/tasks/run.ts', "import { runLoop } from '../loop/loop.ts';");
    await file(
      'agent-server/loop/loop.ts',
      "import type { E } from '../errors.ts';\nimport { x } from './step.ts';",
    );
    await file('agent-server/loop/step.ts', "import type { S } from '../tasks/stop.ts';");
    await file('agent-server/tasks/stop.ts', 'export type S = string;');
    await file('agent-server/store/store.ts', "import type { Model } from '../clients/model.ts';");
    await file('agent-server/clients/model.ts', 'export type Model = string;');
    await file('agent-server/attic/old.ts', 'export const old = 1;');
    expect(findBoundaryViolations(root).sort()).toEqual([
      'agent-server/attic/old.ts: stands on no floor of agent-server (place it in LAYERS, scripts/check-boundaries.ts)',
      'agent-server/loop/step.ts: imports ../tasks/stop.ts (agent-server: loop/ stands below tasks/ and imports nothing of it)',
      'agent-server/store/store.ts: imports ../clients/model.ts (agent-server: store/ and clients/ stand on one floor and import neither)',
    ]);
  });
});

import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findBoundaryViolations } from '../scripts/check-boundaries.ts';

describe('service boundaries', () => {
  it('holds in this repository', () => {
    expect(findBoundaryViolations(process.cwd())).toEqual([]);
  });

  it('catches a service importing another service’s internals, a contract importing code, and lib importing a service', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'bounds-'));
    for (const d of ['agent-server', 'mcp-gateway', 'tool-server', 'lib']) await mkdir(path.join(root, d));
    await writeFile(
      path.join(root, 'tool-server/contract.ts'),
      "import { z } from 'zod';\nexport const A = z.string();\n",
    );
    await writeFile(path.join(root, 'tool-server/registry.ts'), 'export const r = 1;\n');
    await writeFile(
      path.join(root, 'mcp-gateway/gateway.ts'),
      "import { A } from '../tool-server/contract.ts';\nimport { r } from '../tool-server/registry.ts';\n",
    );
    await writeFile(path.join(root, 'agent-server/contract.ts'), "import { log } from '../lib/log.ts';\n");
    await writeFile(path.join(root, 'lib/x.ts'), "const m = await import('../mcp-gateway/gateway.ts');\n");
    expect(findBoundaryViolations(root).sort()).toEqual([
      'agent-server/contract.ts: imports ../lib/log.ts (a contract imports only zod and other contracts)',
      'lib/x.ts: imports ../mcp-gateway/gateway.ts (lib/ must not depend on a service)',
      'mcp-gateway/gateway.ts: imports ../tool-server/registry.ts (only tool-server/contract.ts may be imported from another service)',
    ]);
  });
});

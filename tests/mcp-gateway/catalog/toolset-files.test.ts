import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadToolsetFiles } from '../../../mcp-gateway/catalog/toolset-files.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import { databaseTools } from '../../../tool-server/tools/database/tools.ts';
import { nativeTools } from '../../../tool-server/tools/native.ts';

// The shipped toolset files against the tool-server that serves them: read with the gateway's own loader, so a
// file the gateway would refuse at start fails here first, naming the file and the tool.

const specs = loadToolsetFiles(fileURLToPath(new URL('../../../toolsets', import.meta.url)));
const native = specs.filter((s) => s.backend === 'tool-server');
const served = new Set(
  createRegistry(nativeTools)
    .definitions()
    .map((d) => d.name),
);

describe('toolsets/*.yaml', () => {
  it('every tool a tool-server toolset lists is served by the tool-server registry', () => {
    expect(native.length).toBeGreaterThan(0);
    const missing = native.flatMap((s) =>
      (s.include ?? [])
        .filter((tool) => !served.has(tool))
        .map((tool) => `${path.basename(s.file)}: ${tool}`),
    );
    expect(missing).toEqual([]);
  });

  it('every tool the tool-server serves is in exactly one toolset file', () => {
    const listedIn = new Map<string, string[]>();
    for (const s of native) {
      for (const tool of s.include ?? []) listedIn.set(tool, [...(listedIn.get(tool) ?? []), s.id]);
    }
    const wrong = [...served].filter((tool) => listedIn.get(tool)?.length !== 1);
    expect(wrong.map((tool) => `${tool}: ${listedIn.get(tool)?.join(', ') ?? 'no toolset'}`)).toEqual([]);
  });

  it('database_tools lists exactly the database tools, all read-only', () => {
    const spec = native.find((s) => s.id === 'database_tools');
    expect(spec?.include).toEqual(databaseTools.map((t) => t.name));
    for (const tool of databaseTools) expect(tool.annotations.readOnlyHint).toBe(true);
  });
});

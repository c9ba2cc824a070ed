import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// The service boundary, checked: a service imports nothing of another service but its contract.ts;
// a contract.ts imports only zod and other contracts; lib/ imports no service at all.

const SERVICES = ['agent-server', 'mcp-gateway', 'tool-server'] as const;

const IMPORT =
  /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|import\s+['"]([^'"]+)['"]/g;

function tsFiles(dir: string): string[] {
  let entries: import('node:fs').Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : tsFiles(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

function serviceOf(root: string, file: string): string | undefined {
  const first = path.relative(root, file).split(path.sep)[0];
  return (SERVICES as readonly string[]).includes(first) ? first : undefined;
}

/** Every import that crosses a boundary it should not, as `file: imports spec (why)`. */
export function findBoundaryViolations(root: string): string[] {
  const problems: string[] = [];
  const files = [...SERVICES, 'lib'].flatMap((d) => tsFiles(path.join(root, d)));
  for (const file of files) {
    const rel = path.relative(root, file);
    const own = serviceOf(root, file);
    const isContract = path.basename(file) === 'contract.ts' && path.dirname(rel) === own;
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3];
      const relative = spec.startsWith('.');
      const target = relative ? path.resolve(path.dirname(file), spec) : undefined;
      const targetService = target ? serviceOf(root, target) : undefined;
      const targetIsContract =
        target !== undefined &&
        targetService !== undefined &&
        path.relative(root, target) === path.join(targetService, 'contract.ts');
      if (isContract) {
        if (spec !== 'zod' && !targetIsContract)
          problems.push(`${rel}: imports ${spec} (a contract imports only zod and other contracts)`);
      } else if (!own) {
        if (targetService) problems.push(`${rel}: imports ${spec} (lib/ must not depend on a service)`);
      } else if (targetService && targetService !== own && !targetIsContract) {
        problems.push(
          `${rel}: imports ${spec} (only ${targetService}/contract.ts may be imported from another service)`,
        );
      }
    }
  }
  return problems;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const problems = findBoundaryViolations(process.cwd());
  for (const p of problems) process.stderr.write(`boundary: ${p}\n`);
  if (problems.length > 0) process.exit(1);
  process.stdout.write('boundaries: ok\n');
}

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// The service boundary, checked: a service imports nothing of another service but its contract (contract.ts
// and the parts in its contract/ folder);
// a contract.ts imports only zod and other contracts; lib/ imports no service at all; the CLI reaches the
// services only through their contracts (and the one module it runs on this machine, the server import).
// And no import circle anywhere in the code (services, lib, the CLI, the benchmark, the scripts and the
// start-up files): a circle means no file of it can be read, tested or moved without the others.
//
// Inside a service, its folders stand on floors (LAYERS): a file imports its own place and the floors below it,
// never a floor above, nor another place on its own floor. "Lower" means nearer the ground the rest is built
// on: the contract (what the service says), then the edges that hold no rule of ours (the database, the other
// services, the upstream servers), then the rules, then what faces a client, then the wiring (app.ts builds the
// app, server.ts wires it from configuration, main.ts listens). An arrow that runs back up is a piece of a
// higher floor's work living downstairs: move it to the floor that needs it first.

const SERVICES = ['agent-server', 'mcp-gateway', 'tool-server'] as const;
/** Folders of code outside the services, checked for circles (tests and fixtures are not). */
const OTHER_CODE = ['lib', 'cli', 'bench', 'scripts', 'start'] as const;
/** What the CLI may take from a service beyond its contract: `toolsets import` runs on the user's machine. */
const CLI_MAY_IMPORT = ['mcp-gateway/import/servers.ts'];

/**
 * Each service's floors, ground first; a floor lists its places: a folder (`loop/`) or a file (`app.ts`), from
 * the service's folder, or a few of them that are one place (a contract.ts and the parts in its contract/). A
 * file stands in the place with the longest path that holds it, and every file of a service must stand in one,
 * so a new folder is placed on purpose.
 */
export const LAYERS: Record<(typeof SERVICES)[number], readonly (readonly Place[])[]> = {
  'agent-server': [
    // What the service says (routes, tasks, events) and the typed errors every floor throws or catches.
    [['contract.ts', 'contract/'], 'errors.ts'],
    // The edges: the task store (all of its SQL), the clients of the model and the gateway, and the sandbox
    // run_code scripts run in.
    ['store/', 'clients/', 'sandbox/'],
    // The loop: one task's turns, model ⇄ tools, and the request the model gets.
    ['loop/'],
    // Webhooks: what a task's end or wait POSTs, where it may go, and the deliverer sending it from the store.
    ['webhooks/'],
    // The tasks: starting, queueing, running, pausing and ending loops; their traces and metrics.
    ['tasks/'],
    // What faces a client: the task's events as SSE, and the web console.
    ['http/', 'console/'],
    ['app.ts'],
    ['server.ts'],
    ['main.ts'],
  ],
  'mcp-gateway': [
    [['contract.ts', 'contract/']],
    // What every floor above may throw or read: the refusals (codes and statuses), who acts in this request.
    ['refusals.ts', 'audit-context.ts'],
    // Who a request is (the audit's actor), over HTTP or in-process.
    ['actors.ts'],
    // The edges: the tool-server and the upstream MCP servers, with what a connection keeps out of sight.
    ['backends/'],
    // The toolset files and the catalog built from them over the backends.
    ['catalog/'],
    // All of the gateway's SQL; and the CLI's import of desktop configs, which reads toolset files.
    ['store/', 'import/'],
    // The operator's ceiling: policy, approvals, limits.
    ['ceiling/'],
    // The rules: sessions, activation, calls, refusals.
    ['core/'],
    // The MCP face; the operator's people (users, keys, teams) on the admin API.
    ['face/', 'admin/'],
    // The hot routes' bodies, and their in-process form for an agent in the same process.
    ['local.ts'],
    ['app.ts'],
    ['server.ts'],
    ['main.ts'],
  ],
  'tool-server': [
    ['contract.ts'],
    // The tool errors: a guard refuses with one, as a tool does.
    ['kit/errors.ts'],
    // Confinement to the roots and the SSRF guard.
    ['guards/'],
    // How a tool is declared and the context it gets (the guards it reaches the world through).
    ['kit/'],
    ['tools/'],
    // One call run and timed; the keys of calls.
    ['registry.ts', 'call-record.ts'],
    ['app.ts'],
    ['server.ts'],
    ['main.ts'],
  ],
};

/** A place on a floor: a folder (`loop/`), a file (`app.ts`), or a few paths that are one place. */
type Place = string | readonly string[];

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

/**
 * A service's contract: its contract.ts, or a file of its contract/ folder (parts contract.ts re-exports); or
 * lib/http/contract.ts and lib/http/limits.ts, the base they are written on (a route, an event stream, the error body, the
 * bounds on what a client sends).
 */
function isContractFile(root: string, file: string): boolean {
  const rel = path.relative(root, file);
  if (rel === path.join('lib', 'http', 'contract.ts') || rel === path.join('lib', 'http', 'limits.ts'))
    return true;
  const service = serviceOf(root, file);
  if (!service) return false;
  return (
    rel === path.join(service, 'contract.ts') || rel.startsWith(path.join(service, 'contract') + path.sep)
  );
}

function serviceOf(root: string, file: string): string | undefined {
  const first = path.relative(root, file).split(path.sep)[0];
  return (SERVICES as readonly string[]).includes(first) ? first : undefined;
}

/** The code files of the tree: every service, lib, cli, bench, scripts, and the .ts files at the root. */
function codeFiles(root: string): string[] {
  const top = readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.join(root, e.name));
  return [...top, ...[...SERVICES, ...OTHER_CODE].flatMap((d) => tsFiles(path.join(root, d)))];
}

/** The relative imports of a file (every kind: static, type-only, dynamic, re-exports), as the specs. */
function importsOf(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(IMPORT)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/** The shortest way round a circle from `start` through `members`, as the files in import order. */
function shortestLoop(
  start: string,
  members: ReadonlySet<string>,
  edges: Map<string, string[]>,
  root: string,
) {
  const from = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i];
    for (const w of edges.get(v) ?? []) {
      if (!members.has(path.relative(root, w))) continue;
      if (w === start) {
        const loop = [v];
        while (loop[0] !== start) loop.unshift(from.get(loop[0]) as string);
        return loop.map((f) => path.relative(root, f));
      }
      if (!from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
    }
  }
  return [path.relative(root, start)];
}

/** Every import circle among `files`, each as its files in import order (Tarjan's strongly connected parts). */
export function findCircles(root: string, files: readonly string[] = codeFiles(root)): string[][] {
  const known = new Set(files);
  const edges = new Map(
    files.map((f) => [
      f,
      importsOf(f)
        .filter((spec) => spec.startsWith('.'))
        .map((spec) => path.resolve(path.dirname(f), spec))
        .filter((t) => known.has(t)),
    ]),
  );
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const part: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      part.push(path.relative(root, w));
    } while (w !== v);
    const selfImport = (edges.get(v) ?? []).includes(v);
    if (part.length > 1 || selfImport) circles.push(shortestLoop(v, new Set(part), edges, root));
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return circles;
}

/** Where a file of a service stands: its floor (0 = ground) and its place, or undefined when it has none. */
function placeOf(root: string, service: (typeof SERVICES)[number], file: string) {
  const rel = path.relative(path.join(root, service), file).split(path.sep).join('/');
  let found: { floor: number; place: string; length: number } | undefined;
  LAYERS[service].forEach((places, floor) => {
    for (const place of places) {
      for (const at of typeof place === 'string' ? [place] : place) {
        const holds = at.endsWith('/') ? rel.startsWith(at) : rel === at;
        const name = typeof place === 'string' ? place : place.join(' and ');
        if (holds && (!found || at.length > found.length)) found = { floor, place: name, length: at.length };
      }
    }
  });
  return found;
}

/** Every import inside a service that runs back up a floor or sideways on one, and every file on no floor. */
function findUpwardImports(root: string): string[] {
  const problems: string[] = [];
  for (const service of SERVICES) {
    for (const file of tsFiles(path.join(root, service))) {
      const rel = path.relative(root, file);
      const from = placeOf(root, service, file);
      if (!from) {
        problems.push(
          `${rel}: stands on no floor of ${service} (place it in LAYERS, scripts/check-boundaries.ts)`,
        );
        continue;
      }
      for (const spec of new Set(importsOf(file).filter((s) => s.startsWith('.')))) {
        const target = path.resolve(path.dirname(file), spec);
        if (serviceOf(root, target) !== service) continue;
        const to = placeOf(root, service, target);
        if (!to || to.place === from.place || to.floor < from.floor) continue;
        const rule =
          to.floor === from.floor
            ? `${service}: ${from.place} and ${to.place} stand on one floor and import neither`
            : `${service}: ${from.place} stands below ${to.place} and imports nothing of it`;
        problems.push(`${rel}: imports ${spec} (${rule})`);
      }
    }
  }
  return problems;
}

/** Every import that crosses a boundary it should not, as `file: imports spec (why)`, and every circle. */
export function findBoundaryViolations(root: string): string[] {
  const problems: string[] = findCircles(root).map(
    (c) => `import circle: ${[...c, c[0]].join(' -> ')} (move what they share into a file both import)`,
  );
  const cliFiles = [path.join(root, 'client.ts'), ...tsFiles(path.join(root, 'cli'))];
  for (const file of cliFiles) {
    let specs: string[];
    try {
      specs = importsOf(file);
    } catch {
      continue;
    }
    for (const spec of specs.filter((s) => s.startsWith('.'))) {
      const target = path.relative(root, path.resolve(path.dirname(file), spec));
      const service = serviceOf(root, path.join(root, target));
      if (service && !isContractFile(root, path.join(root, target)) && !CLI_MAY_IMPORT.includes(target)) {
        problems.push(
          `${path.relative(root, file)}: imports ${spec} (the CLI reaches a service through its contract.ts and HTTP)`,
        );
      }
    }
  }
  const files = [...SERVICES, 'lib'].flatMap((d) => tsFiles(path.join(root, d)));
  for (const file of files) {
    const rel = path.relative(root, file);
    const own = serviceOf(root, file);
    const isContract = isContractFile(root, file);
    for (const spec of importsOf(file)) {
      const relative = spec.startsWith('.');
      const target = relative ? path.resolve(path.dirname(file), spec) : undefined;
      const targetService = target ? serviceOf(root, target) : undefined;
      const targetIsContract = target !== undefined && isContractFile(root, target);
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
  return [...problems, ...findUpwardImports(root)];
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const problems = findBoundaryViolations(process.cwd());
  for (const p of problems) process.stderr.write(`boundary: ${p}\n`);
  if (problems.length > 0) process.exit(1);
  process.stdout.write('boundaries: ok\n');
}

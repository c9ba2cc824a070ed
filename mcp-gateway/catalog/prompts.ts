import { readdirSync } from 'node:fs';
import path from 'node:path';
import Handlebars from 'handlebars';
import { z } from 'zod';
import { readYamlFile, YamlFileError } from '../../lib/config/yaml-file.ts';
import { describeIssues } from '../../lib/http/issues.ts';

// Playbook prompts: YAML files in PROMPTS_DIR, each a named template with declared arguments, rendered
// strictly with Handlebars ({{var}}, {{#if var}}…{{/if}}). Served on the MCP face (prompts/list, prompts/get),
// over REST, and as a task's goal. A file that does not load (its YAML, its keys, its template) is skipped and
// named; the others are served.

const Name = z.string().regex(/^[a-z0-9_-]{1,64}$/, 'must match ^[a-z0-9_-]{1,64}$');

const PromptFile = z.strictObject({
  name: Name,
  description: z.string().trim().min(1, 'must not be empty'),
  arguments: z
    .array(
      z.strictObject({
        name: z.string().regex(/^[a-z_][a-z0-9_]{0,63}$/, 'must match ^[a-z_][a-z0-9_]{0,63}$'),
        description: z.string().trim().min(1, 'must not be empty'),
        required: z.boolean().default(false),
      }),
    )
    .default([]),
  template: z.string().trim().min(1, 'must not be empty'),
});

/** A playbook as declared in its file. */
export type Playbook = z.infer<typeof PromptFile> & { file: string };

/** A prompt file that does not load, or a render with wrong arguments; the message says what is valid. */
export class PromptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A render of a prompt that does not exist (404 over REST). */
export class UnknownPromptError extends PromptError {}

/** The longest value one argument may have, so a render cannot be used to build huge goals. */
const MAX_ARGUMENT_CHARS = 20_000;

type Render = (args: Record<string, string>) => string;

function compile(p: Playbook): Render {
  // strict: a name the template uses but the file does not declare fails; noEscape: prompts are not HTML.
  const template = Handlebars.create().compile(p.template, { strict: true, noEscape: true });
  // Checked at load: a template that names an undeclared argument must fail now, not at a user's request.
  try {
    template(Object.fromEntries(p.arguments.map((a) => [a.name, 'x'])));
  } catch (err) {
    throw new PromptError(
      `${p.file}: the template does not render with the declared arguments (${p.arguments.map((a) => a.name).join(', ') || 'none'}): ${(err as Error).message.split('\n')[0]}`,
    );
  }
  return template;
}

type Entry = { playbook: Playbook; render: Render };

/** One prompt file, or a PromptError naming it. */
function loadPlaybook(file: string): Entry {
  let raw: unknown;
  try {
    raw = readYamlFile(file).value;
  } catch (err) {
    if (err instanceof YamlFileError) throw new PromptError(err.message);
    throw err;
  }
  const parsed = PromptFile.safeParse(raw);
  if (!parsed.success) throw new PromptError(`${file}: ${describeIssues(parsed.error)}`);
  const playbook = { ...parsed.data, file };
  return { playbook, render: compile(playbook) };
}

/**
 * Reads every `*.yaml`/`*.yml` of `dir` (a missing dir is an empty catalog). A file that does not load is
 * skipped, its error (file and reason) in `warnings`; the others load.
 */
export function loadPlaybooks(dir: string): { playbooks: Map<string, Entry>; warnings: string[] } {
  const playbooks = new Map<string, Entry>();
  const warnings: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((f) => /\.ya?ml$/.test(f))
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      warnings.push(`Cannot read the prompts directory ${dir}: ${(err as Error).message}`);
    }
    return { playbooks, warnings };
  }
  for (const name of names) {
    const file = path.join(dir, name);
    try {
      const entry = loadPlaybook(file);
      const clash = playbooks.get(entry.playbook.name);
      if (clash) {
        throw new PromptError(
          `${file}: prompt ${entry.playbook.name} is already defined in ${clash.playbook.file}`,
        );
      }
      playbooks.set(entry.playbook.name, entry);
    } catch (err) {
      const message = err instanceof PromptError ? err.message : `${file}: ${(err as Error).message}`;
      warnings.push(`${message} (this file is skipped; the other prompts load)`);
    }
  }
  return { playbooks, warnings };
}

/** The playbook catalog; reload() swaps it whole or not at all. */
export type PromptCatalog = ReturnType<typeof createPromptCatalog>;

/** Loads the catalog from `dir`; warnings() names the files skipped. */
export function createPromptCatalog(dir: string) {
  let loaded = loadPlaybooks(dir);
  let playbooks = loaded.playbooks;
  const names = () => [...playbooks.keys()].join(', ') || 'none';
  return {
    /** As MCP lists prompts. */
    list: () =>
      [...playbooks.values()].map(({ playbook: p }) => ({
        name: p.name,
        description: p.description,
        arguments: p.arguments.map((a) => ({
          name: a.name,
          description: a.description,
          required: a.required,
        })),
      })),
    /** Renders `name` with `args`, refusing unknown and missing arguments. */
    render(name: string, args: Record<string, unknown>): { name: string; description: string; text: string } {
      const entry = playbooks.get(name);
      if (!entry) throw new UnknownPromptError(`Unknown prompt ${name}; prompts: ${names()}`);
      const { playbook: p } = entry;
      const declared = p.arguments.map((a) => a.name);
      const unknown = Object.keys(args).filter((k) => !declared.includes(k));
      if (unknown.length > 0) {
        throw new PromptError(
          `Unknown argument(s) for ${name}: ${unknown.join(', ')}; it takes: ${declared.join(', ') || 'none'}`,
        );
      }
      const missing = p.arguments.filter((a) => a.required && (args[a.name] ?? '') === '').map((a) => a.name);
      if (missing.length > 0)
        throw new PromptError(`Missing required argument(s) for ${name}: ${missing.join(', ')}`);
      const values: Record<string, string> = {};
      for (const a of p.arguments) {
        const v = args[a.name];
        if (v !== undefined && typeof v !== 'string')
          throw new PromptError(`Argument ${a.name} of ${name} must be a string`);
        if ((v ?? '').length > MAX_ARGUMENT_CHARS) {
          throw new PromptError(
            `Argument ${a.name} of ${name} is longer than ${MAX_ARGUMENT_CHARS} characters`,
          );
        }
        values[a.name] = v ?? '';
      }
      return { name, description: p.description, text: entry.render(values).trim() };
    },
    /** The files skipped at the last load, each with its reason. */
    warnings: () => loaded.warnings,
    /** Re-reads the directory: the files that load replace the catalog, the others are named in warnings. */
    reload(): { prompts: string[]; warnings: string[] } {
      loaded = loadPlaybooks(dir);
      playbooks = loaded.playbooks;
      return { prompts: [...playbooks.keys()], warnings: loaded.warnings };
    },
  };
}

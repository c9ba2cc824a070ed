import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Handlebars from 'handlebars';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { describeIssues } from '../../lib/issues.ts';

// Playbook prompts: YAML files in PROMPTS_DIR, each a named template with declared arguments, rendered
// strictly with Handlebars ({{var}}, {{#if var}}…{{/if}}). Served on the MCP face (prompts/list, prompts/get),
// over REST, and as a task's goal.

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

/** Reads every `*.yaml`/`*.yml` of `dir` (a missing dir is an empty catalog); refuses bad files naming them. */
export function loadPlaybooks(dir: string): Map<string, { playbook: Playbook; render: Render }> {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((f) => /\.ya?ml$/.test(f))
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw new PromptError(`Cannot read the prompts directory ${dir}: ${(err as Error).message}`);
  }
  const out = new Map<string, { playbook: Playbook; render: Render }>();
  for (const name of names) {
    const file = path.join(dir, name);
    let raw: unknown;
    try {
      raw = parseYaml(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new PromptError(`${file}: not valid YAML: ${(err as Error).message}`);
    }
    const parsed = PromptFile.safeParse(raw);
    if (!parsed.success) throw new PromptError(`${file}: ${describeIssues(parsed.error)}`);
    const playbook = { ...parsed.data, file };
    const clash = out.get(playbook.name);
    if (clash)
      throw new PromptError(`${file}: prompt ${playbook.name} is already defined in ${clash.playbook.file}`);
    out.set(playbook.name, { playbook, render: compile(playbook) });
  }
  return out;
}

/** The playbook catalog; reload() swaps it whole or not at all. */
export type PromptCatalog = ReturnType<typeof createPromptCatalog>;

/** Loads the catalog from `dir`. */
export function createPromptCatalog(dir: string) {
  let playbooks = loadPlaybooks(dir);
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
    /** Re-reads the directory; on an error the running catalog stays and the error is thrown. */
    reload(): { prompts: string[] } {
      playbooks = loadPlaybooks(dir);
      return { prompts: [...playbooks.keys()] };
    },
  };
}

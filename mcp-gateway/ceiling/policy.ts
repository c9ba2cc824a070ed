import { existsSync } from 'node:fs';
import picomatch from 'picomatch';
import { z } from 'zod';
import { parseYamlText, readYamlFile, YamlFileError } from '../../lib/config/yaml-file.ts';
import { describeIssues } from '../../lib/http/issues.ts';

// The operator's policy: allow / ask / deny rules by tool name or glob, by toolset, and by annotation, for
// calls and for activations, first match wins. Read from POLICY_FILE; enforced in the gateway, so every
// path (the agent's REST calls and the MCP face) obeys it.

/** What a rule decides. */
export const Decision = z.enum(['allow', 'ask', 'deny']);
export type Decision = z.infer<typeof Decision>;

/**
 * A tool's hints as MCP defines them when absent: not read-only, destructive, not idempotent, open-world
 * (destructive and idempotent mean something only for a tool that is not read-only). A rule judges these,
 * so an upstream tool that declares nothing cannot slip past `{annotation: destructiveHint, decision: ask}`.
 */
export function effectiveHints(
  annotations: Record<string, unknown>,
): Record<z.infer<typeof Annotation>, boolean> {
  const readOnly = annotations.readOnlyHint === true;
  return {
    readOnlyHint: readOnly,
    destructiveHint: !readOnly && annotations.destructiveHint !== false,
    idempotentHint: !readOnly && annotations.idempotentHint === true,
    openWorldHint: annotations.openWorldHint !== false,
  };
}

/** The annotations a rule may test (a tool matches when its effective hint is true; see effectiveHints). */
const Annotation = z.enum(['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']);

const Rule = z
  .strictObject({
    tool: z.string().min(1).optional(),
    toolset: z.string().min(1).optional(),
    annotation: Annotation.optional(),
    on: z.enum(['call', 'activate']).default('call'),
    decision: Decision,
    reason: z.string().max(500).optional(),
  })
  .refine((r) => r.tool !== undefined || r.toolset !== undefined || r.annotation !== undefined, {
    message: 'a rule needs at least one of tool, toolset, annotation',
  })
  .refine((r) => r.on === 'call' || (r.tool === undefined && r.annotation === undefined), {
    message: 'an "on: activate" rule matches toolsets only: use toolset, not tool or annotation',
  });

const PolicyFile = z.strictObject({ default: Decision.default('allow'), rules: z.array(Rule).default([]) });

/** A policy file that cannot be used; the message names the file, the rule and what is valid. */
export class PolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** What is being decided: a call of a tool, or the activation of a toolset. */
export type PolicySubject =
  | { on: 'call'; tool: string; toolset: string; annotations: Record<string, unknown> }
  | { on: 'activate'; toolset: string };

/** The verdict, with the rule that gave it (`rule` is null for the default). */
export interface Verdict {
  decision: Decision;
  rule: number | null;
  reason: string;
}

/** A loaded policy. */
export interface Policy {
  decide(subject: PolicySubject): Verdict;
  /** The policy as loaded, for the admin API; `error` when the file did not load and everything is denied. */
  describe(): { file: string | null; default: Decision; rules: z.infer<typeof Rule>[]; error?: string };
}

/** Parses policy text; `file` names it in errors. */
export function parsePolicy(text: string, file: string): Policy {
  return policyFrom(
    yamlValue(() => parseYamlText(text, file).value),
    file,
  );
}

/** The file's YAML (bounded: size, aliases), or a PolicyError naming it. */
function yamlValue(parse: () => unknown): unknown {
  try {
    return parse() ?? {};
  } catch (err) {
    if (err instanceof YamlFileError) throw new PolicyError(err.message);
    throw err;
  }
}

function policyFrom(raw: unknown, file: string): Policy {
  const parsed = PolicyFile.safeParse(raw);
  if (!parsed.success) {
    // "rule 2: decision: …" rather than zod's "rules.1.decision: …".
    const problems = parsed.error.issues.map((i) => {
      const [top, index, ...rest] = i.path;
      if (top !== 'rules' || typeof index !== 'number') return describeIssues(new z.ZodError([i]));
      return `rule ${index + 1}: ${rest.length > 0 ? `${rest.join('.')}: ` : ''}${i.message}`;
    });
    throw new PolicyError(
      `${file}: ${problems.join('; ')}. A rule is {tool?: glob, toolset?: glob, annotation?: ` +
        'readOnlyHint|destructiveHint|idempotentHint|openWorldHint, on?: call|activate, decision: allow|ask|deny, reason?}',
    );
  }
  const { default: fallback, rules } = parsed.data;
  const matchers = rules.map((r) => ({
    rule: r,
    tool: r.tool ? picomatch(r.tool) : undefined,
    toolset: r.toolset ? picomatch(r.toolset) : undefined,
  }));
  return {
    decide(subject) {
      for (const [i, m] of matchers.entries()) {
        if (m.rule.on !== subject.on) continue;
        if (m.toolset && !m.toolset(subject.toolset)) continue;
        if (subject.on === 'call') {
          if (m.tool && !m.tool(subject.tool)) continue;
          if (m.rule.annotation && !effectiveHints(subject.annotations)[m.rule.annotation]) continue;
        }
        const what = [
          m.rule.tool && `tool ${m.rule.tool}`,
          m.rule.toolset && `toolset ${m.rule.toolset}`,
          m.rule.annotation,
        ]
          .filter(Boolean)
          .join(', ');
        return {
          decision: m.rule.decision,
          rule: i + 1,
          reason: m.rule.reason ?? `policy rule ${i + 1} (${what})`,
        };
      }
      return { decision: fallback, rule: null, reason: 'the policy default' };
    },
    describe: () => ({ file, default: fallback, rules }),
  };
}

/** Loads POLICY_FILE; a missing file is the permissive default (allow everything), said in describe(). */
export function loadPolicy(file: string): Policy {
  if (!existsSync(file)) {
    const policy = parsePolicy('default: allow\n', file);
    return { decide: policy.decide, describe: () => ({ ...policy.describe(), file: null }) };
  }
  return policyFrom(
    yamlValue(() => readYamlFile(file).value),
    file,
  );
}

/**
 * What runs when POLICY_FILE does not load at start: every call and activation denied, with the file's
 * error as the reason, until the file is fixed and reloaded. The gateway stays up and fails closed.
 */
export function denyAllPolicy(file: string, error: string): Policy {
  const reason = `the policy file does not load, so everything is denied until it is fixed and reloaded: ${error}`;
  return {
    decide: () => ({ decision: 'deny', rule: null, reason }),
    describe: () => ({ file, default: 'deny', rules: [], error }),
  };
}

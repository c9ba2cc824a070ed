import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../../mcp-gateway/ceiling/policy.ts';

const POLICY = `
default: allow
rules:
  - { tool: delete_file, decision: deny }
  - { tool: "write_*", decision: ask }
  - { annotation: destructiveHint, decision: ask, reason: destructive tools need a human yes }
  - { toolset: git_tools, on: activate, decision: ask }
  - { toolset: "web_*", tool: fetch_url, decision: deny }
`;

const call = (tool: string, toolset = 'file_system_tools', annotations: Record<string, unknown> = {}) =>
  ({ on: 'call', tool, toolset, annotations }) as const;

describe('policy', () => {
  it('decides by tool, glob, annotation and toolset, first match wins, else the default', () => {
    const p = parsePolicy(POLICY, 'policy.yaml');
    expect(p.decide(call('delete_file', 'file_system_tools', { destructiveHint: true }))).toMatchObject({
      decision: 'deny',
      rule: 1,
    });
    expect(p.decide(call('write_file'))).toMatchObject({ decision: 'ask', rule: 2 });
    expect(p.decide(call('move_file', 'file_system_tools', { destructiveHint: true }))).toEqual({
      decision: 'ask',
      rule: 3,
      reason: 'destructive tools need a human yes',
    });
    expect(
      p.decide(call('read_text_file', 'file_system_tools', { readOnlyHint: true, destructiveHint: false })),
    ).toEqual({
      decision: 'allow',
      rule: null,
      reason: 'the policy default',
    });
    expect(p.decide({ on: 'activate', toolset: 'git_tools' })).toMatchObject({ decision: 'ask', rule: 4 });
    expect(p.decide({ on: 'activate', toolset: 'file_system_tools' }).decision).toBe('allow');
    // A call rule never answers an activation, and both matchers of a rule must match.
    const readOnly = { readOnlyHint: true };
    expect(p.decide(call('git_status', 'git_tools', readOnly)).decision).toBe('allow');
    expect(p.decide(call('fetch_url', 'web_tools', readOnly)).decision).toBe('deny');
    expect(p.decide(call('fetch_url', 'other', readOnly)).decision).toBe('allow');
  });

  it('judges annotation rules on the hints MCP defines for a tool that declares none', () => {
    const p = parsePolicy(
      `
rules:
  - { annotation: destructiveHint, decision: ask }
  - { annotation: openWorldHint, decision: deny }
`,
      'policy.yaml',
    );
    // An upstream tool with no annotations at all is destructive and open-world by MCP's defaults.
    expect(p.decide(call('wipe', 'upstream', {})).decision).toBe('ask');
    expect(p.decide(call('wipe', 'upstream', { destructiveHint: false })).decision).toBe('deny');
    // Read-only makes destructiveHint meaningless (false), whatever was sent with it.
    expect(p.decide(call('peek', 'upstream', { readOnlyHint: true, destructiveHint: true })).decision).toBe(
      'deny',
    );
    expect(p.decide(call('peek', 'upstream', { readOnlyHint: true, openWorldHint: false })).decision).toBe(
      'allow',
    );
  });

  it('refuses a malformed policy naming the file, the rule and what is valid', () => {
    expect(() => parsePolicy('rules:\n  - { tool: x, decision: maybe }\n', 'p.yaml')).toThrow(
      /^p\.yaml: rule 1: decision: Invalid option: expected one of "allow"\|"ask"\|"deny".*A rule is \{tool\?: glob/,
    );
    expect(() => parsePolicy('rules:\n  - { decision: deny }\n', 'p.yaml')).toThrow(
      /p\.yaml: rule 1: a rule needs at least one of tool, toolset, annotation/,
    );
    expect(() => parsePolicy('rules:\n  - { tool: a, on: activate, decision: ask }\n', 'p.yaml')).toThrow(
      /an "on: activate" rule matches toolsets only/,
    );
    expect(() => parsePolicy('rules:\n  - { tool: a, decision: deny, when: night }\n', 'p.yaml')).toThrow(
      /Unrecognized key: "when"/,
    );
    expect(() => parsePolicy('default: block\n', 'p.yaml')).toThrow(/^p\.yaml: default: Invalid option/);
    expect(() => parsePolicy('rules: [', 'p.yaml')).toThrow(/^p\.yaml:1: not valid YAML/);
  });
});

import { describe, expect, it } from 'vitest';
import { aliasesOf, declarationsFor, typeOf } from '../../../agent-server/loop/declarations.ts';
import type { GatewayTool } from '../../../mcp-gateway/contract.ts';

// The TypeScript a code task's model reads: typed from the tools' JSON Schemas, each tool once.

const tool = (name: string, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  ({
    name,
    description: `Does ${name}.`,
    parameters,
    annotations: {},
    toolset: 'ts1',
    ...extra,
  }) as GatewayTool;

describe('declarations', () => {
  it('types parameters from JSON Schema: required, optional, enums, arrays, unions, nested objects', () => {
    expect(
      typeOf({
        type: 'object',
        properties: {
          path: { type: 'string' },
          head: { type: 'integer' },
          mode: { enum: ['a', 'b'] },
          tags: { type: 'array', items: { type: 'string' } },
          when: { anyOf: [{ type: 'string' }, { type: 'null' }] },
          'odd-key': { type: 'object', properties: { x: { type: 'boolean' } }, required: ['x'] },
        },
        required: ['path'],
      }),
    ).toBe(
      '{\n  path: string;\n  head?: number;\n  mode?: "a" | "b";\n  tags?: string[];\n  when?: string | null;\n  "odd-key"?: { x: boolean; };\n}',
    );
    expect(typeOf({ type: 'object', additionalProperties: { type: 'number' } })).toBe(
      '{ [key: string]: number; }',
    );
    expect(typeOf({ type: 'object' })).toBe('Record<string, unknown>');
    expect(typeOf(undefined)).toBe('unknown');
  });

  it('keeps property descriptions as comments and stops at a bounded depth', () => {
    const text = typeOf({
      type: 'object',
      properties: { path: { type: 'string', description: 'Where, relative to a root */ escape' } },
      required: ['path'],
    });
    expect(text).toBe('{\n  /** Where, relative to a root *\\/ escape */\n  path: string;\n}');
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 20; i++) deep = { type: 'array', items: deep };
    expect(typeOf(deep)).toMatch(/unknown/);
  });

  it('makes a tool a global only under its own name, when that is an identifier the script may take', () => {
    const aliases = aliasesOf([{ name: 'get-sum' }, { name: 'get_sum' }, { name: '2fa' }, { name: 'print' }]);
    expect([...aliases]).toEqual([
      ['get-sum', undefined],
      ['get_sum', 'get_sum'],
      ['2fa', undefined],
      ['print', undefined],
    ]);
  });

  it('stays small for a hostile schema: nested type lists, huge enums, thousands of properties', () => {
    let nested: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 8; i++)
      nested = { type: Array(8).fill('object'), properties: { p: nested, q: nested } };
    const started = performance.now();
    const text = typeOf(nested);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(text.length).toBeLessThan(200_000);
    expect(typeOf({ enum: Array.from({ length: 50_000 }, (_, i) => `v${i}`) })).toBe('string');
    const wide = typeOf({
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`k${i}`, { type: 'string' }])),
    });
    expect(wide.split('\n').length).toBeLessThanOrEqual(103);
    expect(wide).toContain('[key: string]: unknown;');
    const huge = declarationsFor(
      [
        tool('big', {
          type: 'object',
          properties: Object.fromEntries(
            Array.from({ length: 90 }, (_, i) => [`p${i}`, { type: 'string', description: 'x'.repeat(500) }]),
          ),
        }),
      ],
      new Set(),
    );
    expect(huge.length).toBeLessThan(2_000);
    expect(huge).toContain('declare function big(args?: Record<string, unknown>): Promise<unknown>;');
  });

  it('declares each tool once per conversation, grouped by toolset, with what it returns when known', () => {
    const shown = new Set<string>();
    const a = tool(
      'read',
      { type: 'object', properties: { p: { type: 'string' } }, required: ['p'] },
      {
        output_schema: { type: 'object', properties: { content: { type: 'string' } }, required: ['content'] },
      },
    );
    const b = tool('get-sum', { type: 'object', properties: {} }, { toolset: 'ts2' });
    const first = declarationsFor([a], shown);
    expect(first).toBe(
      '// toolset ts1\n/** Does read. */\ndeclare function read(args: { p: string; }): Promise<{ content: string; }>;',
    );
    const second = declarationsFor([a, b], shown);
    expect(second).toBe(
      '// toolset ts2\n/** Does get-sum. */\ndeclare const tools: { "get-sum"(args?: Record<string, unknown>): Promise<unknown> };',
    );
    expect(declarationsFor([a, b], shown)).toBe('');
  });
});

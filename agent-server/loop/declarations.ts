import type { GatewayTool } from '../../mcp-gateway/contract.ts';

// A code task's tools as the model reads them: TypeScript declarations of async functions, typed from their
// JSON Schemas (the parameters, and what each returns when the tool says). Each tool is also a global of the
// script under its alias: its name when that is an identifier, else with `_` for what is not.

type Schema = Record<string, unknown>;

/** Names a script cannot take for a tool: the language's words and what the sandbox gives it. */
const TAKEN = new Set(
  (
    'break case catch class const continue debugger default delete do else enum export extends false finally ' +
    'for function if import in instanceof new null return super switch this throw true try typeof var void ' +
    'while with yield let static implements interface package private protected public await async ' +
    'arguments eval undefined NaN Infinity globalThis console print sleep tools Date JSON Math Object Array ' +
    'String Number Boolean Promise Error Map Set Symbol RegExp BigInt Reflect Proxy parseInt parseFloat'
  ).split(' '),
);

/** How deep a schema is followed before a part is `unknown`: a declaration stays small. */
const MAX_DEPTH = 6;
/** A description longer than this is cut in a declaration (the model has the tool's own once it runs it). */
const MAX_DOC = 600;

/** Each tool's global in a script, in the order given; a tool whose alias another took has none. */
export function aliasesOf(tools: readonly { name: string }[]): Map<string, string | undefined> {
  const taken = new Set<string>();
  const out = new Map<string, string | undefined>();
  for (const { name } of tools) {
    let alias = name.replace(/[^A-Za-z0-9_$]/g, '_');
    if (/^[0-9]/.test(alias)) alias = `_${alias}`;
    if (TAKEN.has(alias)) alias = `${alias}_`;
    out.set(name, taken.has(alias) ? undefined : alias);
    taken.add(alias);
  }
  return out;
}

const doc = (text: string, indent: string) => {
  const t = text.trim().replace(/\*\//g, '*\\/');
  if (t === '') return '';
  const cut = t.length > MAX_DOC ? `${t.slice(0, MAX_DOC)}…` : t;
  return `${indent}/** ${cut.replace(/\n/g, `\n${indent} * `)} */\n`;
};

const literal = (v: unknown) =>
  typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || v === null
    ? JSON.stringify(v)
    : 'unknown';

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** A JSON Schema as a TypeScript type; `indent` is where its properties' lines start. */
export function typeOf(schema: unknown, indent = '', depth = 0, brief = false): string {
  if (typeof schema !== 'object' || schema === null || depth > MAX_DEPTH) return 'unknown';
  const s = schema as Schema;
  if ('const' in s) return literal(s.const);
  if (Array.isArray(s.enum)) return s.enum.map(literal).join(' | ') || 'never';
  for (const key of ['anyOf', 'oneOf'] as const) {
    if (Array.isArray(s[key]))
      return union((s[key] as unknown[]).map((p) => typeOf(p, indent, depth + 1, brief)));
  }
  if (Array.isArray(s.allOf))
    return (s.allOf as unknown[]).map((p) => typeOf(p, indent, depth + 1, brief)).join(' & ');
  const type = s.type;
  if (Array.isArray(type)) return union(type.map((t) => typeOf({ ...s, type: t }, indent, depth, brief)));
  switch (type) {
    case 'string':
      return 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array': {
      const item = typeOf(s.items, indent, depth + 1, brief);
      return /^[A-Za-z]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
    }
    case 'object':
      return objectType(s, indent, depth, brief);
    default:
      return s.properties ? objectType(s, indent, depth, brief) : 'unknown';
  }
}

function union(parts: string[]): string {
  const unique = [...new Set(parts)];
  return unique.includes('unknown') ? 'unknown' : unique.join(' | ');
}

function objectType(s: Schema, indent: string, depth: number, brief: boolean): string {
  const props = (typeof s.properties === 'object' && s.properties !== null ? s.properties : {}) as Record<
    string,
    unknown
  >;
  const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
  const inner = `${indent}  `;
  const lines: string[] = [];
  for (const [key, prop] of Object.entries(props)) {
    const name = IDENT.test(key) ? key : JSON.stringify(key);
    const description = (prop as Schema | null)?.description;
    const text = typeof description === 'string' && !brief ? doc(description, inner) : '';
    lines.push(
      `${text}${inner}${name}${required.has(key) ? '' : '?'}: ${typeOf(prop, inner, depth + 1, brief)};`,
    );
  }
  const extra = s.additionalProperties;
  if (typeof extra === 'object' && extra !== null)
    lines.push(`${inner}[key: string]: ${typeOf(extra, inner, depth + 1, brief)};`);
  else if (lines.length === 0) return extra === false ? '{}' : 'Record<string, unknown>';
  // Short members without comments fit on one line, as a person would write them.
  const flat = lines.map((l) => l.trim());
  const oneLine = `{ ${flat.join(' ')} }`;
  if (brief || (!lines.some((l) => l.includes('/**')) && oneLine.length <= 100)) return oneLine;
  return `{\n${lines.join('\n')}\n${indent}}`;
}

/**
 * A description without its "Returns {…}" clause, when the declared return type says the same; unchanged when
 * the clause is not there or its braces do not close.
 */
export function withoutReturns(text: string): string {
  const at = text.indexOf('Returns {');
  if (at < 0) return text;
  let depth = 0;
  let i = at + 'Returns '.length;
  for (; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') depth++;
    else if ((c === '}' || c === ']') && --depth === 0) break;
  }
  if (depth !== 0) return text;
  const end = text[i + 1] === '.' || text[i + 1] === ';' ? i + 2 : i + 1;
  return `${text.slice(0, at)}${text.slice(end).trimStart()}`.trim();
}

/** One tool's declaration: its description, then the function the script calls. */
export function declarationOf(tool: GatewayTool, alias: string | undefined): string {
  const output = (tool as GatewayTool & { output_schema?: unknown }).output_schema;
  // What a tool returns, on one line without comments: its description says the rest.
  const returns = output === undefined ? 'unknown' : typeOf(output, '', 0, true);
  const params = typeOf(tool.parameters);
  const optional = !(Array.isArray(tool.parameters.required) && tool.parameters.required.length > 0);
  const signature = `(args${optional ? '?' : ''}: ${params}): Promise<${returns}>`;
  const head = doc(output === undefined ? tool.description : withoutReturns(tool.description), '');
  if (alias) return `${head}declare function ${alias}${signature};`;
  // Its alias was another tool's first: it is only a member of `tools`.
  return `${head}declare const tools: { ${JSON.stringify(tool.name)}${signature} };`;
}

/**
 * The declarations of `usable` the conversation has not seen (`shown` remembers them, and is updated), grouped by
 * toolset; empty when every one was shown.
 */
export function declarationsFor(usable: readonly GatewayTool[], shown: Set<string>): string {
  const aliases = aliasesOf(usable);
  const fresh = usable.filter((t) => !shown.has(t.name));
  const parts: string[] = [];
  let toolset: string | undefined;
  for (const t of fresh) {
    shown.add(t.name);
    if (t.toolset !== toolset) parts.push(`// toolset ${t.toolset}`);
    toolset = t.toolset;
    parts.push(declarationOf(t, aliases.get(t.name)));
  }
  return parts.join('\n');
}

import type { GatewayTool } from '../../mcp-gateway/contract.ts';

// A code task's tools as the model reads them: TypeScript declarations of async functions, typed from their
// JSON Schemas (the parameters, and what each returns when the tool says). Each tool is a global of the script
// when its name is an identifier, and `tools["its-name"]` always. A schema is the tool's server's to write: the
// work and the text it takes are bounded, past which a part is `unknown`.

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

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** How deep a schema is followed before a part is `unknown`: a declaration stays small. */
const MAX_DEPTH = 6;
/** A description longer than this is cut in a declaration (the model has the tool's own once it runs it). */
const MAX_DOC = 600;

/**
 * Each tool's global in a script: its own name when that is an identifier the script may take, else none (it
 * is `tools["its-name"]`). Never a name made up from another: a tool that came later could otherwise take over
 * a name the model was given for an earlier one (`read-text-file` for `read_text_file`).
 */
export function aliasesOf(tools: readonly { name: string }[]): Map<string, string | undefined> {
  return new Map(tools.map(({ name }) => [name, IDENT.test(name) && !TAKEN.has(name) ? name : undefined]));
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

/** How one type is written: briefly (one line, no comments), and how many schema nodes it may still visit. */
interface Render {
  brief: boolean;
  left: number;
}

/** Schema nodes one type may visit, enum values and properties it writes out: a hostile schema stays small. */
const MAX_NODES = 2_000;
const MAX_ENUM = 30;
const MAX_PROPERTIES = 100;

/** A JSON Schema as a TypeScript type; `indent` is where its properties' lines start. */
export function typeOf(schema: unknown, indent = '', depth = 0, brief = false): string {
  return render(schema, { brief, left: MAX_NODES }, indent, depth);
}

function render(schema: unknown, r: Render, indent: string, depth: number): string {
  if (typeof schema !== 'object' || schema === null || depth > MAX_DEPTH || --r.left < 0) return 'unknown';
  const s = schema as Schema;
  if ('const' in s) return literal(s.const);
  if (Array.isArray(s.enum)) {
    // A long list is its values' type: the description names them, if anything does.
    if (s.enum.length > MAX_ENUM) return union(s.enum.map((v) => (v === null ? 'null' : typeof v)));
    return s.enum.map(literal).join(' | ') || 'never';
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    if (Array.isArray(s[key]))
      return union((s[key] as unknown[]).map((p) => render(p, r, indent, depth + 1)));
  }
  if (Array.isArray(s.allOf))
    return (s.allOf as unknown[]).map((p) => render(p, r, indent, depth + 1)).join(' & ');
  // Each type once: `["object", "object", …]` is one object, not one per entry.
  if (Array.isArray(s.type)) return union([...new Set(s.type)].map((t) => typed(s, t, r, indent, depth)));
  return typed(s, s.type, r, indent, depth);
}

function typed(s: Schema, type: unknown, r: Render, indent: string, depth: number): string {
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
      const item = render(s.items, r, indent, depth + 1);
      return /^[A-Za-z]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
    }
    case 'object':
      return objectType(s, r, indent, depth);
    default:
      return s.properties ? objectType(s, r, indent, depth) : 'unknown';
  }
}

function union(parts: string[]): string {
  const unique = [...new Set(parts.map((p) => (p === 'undefined' || p === 'object' ? 'unknown' : p)))];
  return unique.includes('unknown') ? 'unknown' : unique.join(' | ');
}

function objectType(s: Schema, r: Render, indent: string, depth: number): string {
  const props = (typeof s.properties === 'object' && s.properties !== null ? s.properties : {}) as Record<
    string,
    unknown
  >;
  const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
  const inner = `${indent}  `;
  const lines: string[] = [];
  const entries = Object.entries(props);
  for (const [key, prop] of entries.slice(0, MAX_PROPERTIES)) {
    const name = IDENT.test(key) ? key : JSON.stringify(key);
    const description = (prop as Schema | null)?.description;
    const text = typeof description === 'string' && !r.brief ? doc(description, inner) : '';
    lines.push(
      `${text}${inner}${name}${required.has(key) ? '' : '?'}: ${render(prop, r, inner, depth + 1)};`,
    );
  }
  const extra = s.additionalProperties;
  if (typeof extra === 'object' && extra !== null)
    lines.push(`${inner}[key: string]: ${render(extra, r, inner, depth + 1)};`);
  else if (entries.length > MAX_PROPERTIES) lines.push(`${inner}[key: string]: unknown;`);
  else if (lines.length === 0) return extra === false ? '{}' : 'Record<string, unknown>';
  // Short members without comments fit on one line, as a person would write them.
  const flat = lines.map((l) => l.trim());
  const oneLine = `{ ${flat.join(' ')} }`;
  if (r.brief || (!lines.some((l) => l.includes('/**')) && oneLine.length <= 100)) return oneLine;
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

/** The longest declaration of one tool; past it, its types are left out. */
const MAX_DECLARATION = 8 * 1024;

/** One tool's declaration: its description, then the function the script calls. */
export function declarationOf(tool: GatewayTool, alias: string | undefined): string {
  const whole = declared(tool, alias, true);
  return whole.length <= MAX_DECLARATION ? whole : declared(tool, alias, false);
}

function declared(tool: GatewayTool, alias: string | undefined, typed: boolean): string {
  const output = typed ? tool.output_schema : undefined;
  // What a tool returns, on one line without comments: its description says the rest.
  const returns = output === undefined ? 'unknown' : typeOf(output, '', 0, true);
  const params = typed ? typeOf(tool.parameters) : 'Record<string, unknown>';
  const optional = !(Array.isArray(tool.parameters.required) && tool.parameters.required.length > 0);
  const signature = `(args${optional ? '?' : ''}: ${params}): Promise<${returns}>`;
  const description = output === undefined ? tool.description : withoutReturns(tool.description);
  const head = doc(typed ? description : `${description}\n(Its schema is too large to declare here.)`, '');
  if (alias) return `${head}declare function ${alias}${signature};`;
  // Its name is no identifier (or one the script has already): it is a member of `tools`.
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

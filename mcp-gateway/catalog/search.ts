import MiniSearch from 'minisearch';
import { stemmer } from 'stemmer';

// Discovery: rank toolsets, and the tools inside them, for a plain-language need ("open an issue on a
// repository"). BM25 (minisearch) over toolset ids, descriptions and keywords and tool names, descriptions and
// parameters (their names, descriptions and named values in the input schema), with snake_case/camelCase names
// split into words and every word stemmed (stemmer), so "issues", "issue_write" and "Issue" meet.

/** What the index is built from: each toolset with the tools it offers (or will offer). */
export interface SearchableToolset {
  id: string;
  description: string;
  /** The toolset file's `keywords`: how people ask for its work (discovery only). */
  keywords?: readonly string[];
  /** Terms learned from use (catalog/learned.ts), already stemmed; ranked below `keywords`, never shown. */
  learned?: readonly string[];
  /** Each tool with its input JSON Schema, whose parameters describe the tool's work in more words. */
  tools: { name: string; description: string; parameters?: unknown }[];
}

/** One ranked toolset and the tools in it that matched, best first. */
export interface ToolsetHit {
  id: string;
  score: number;
  matched_tools: string[];
  /** Only on the first hit: it leads the next by the margin DEFAULT_WEIGHTS.certainty asks (see there). */
  certain?: boolean;
}

const STOP_WORDS = new Set(
  `a an the to of in on at for from by with and or but not no is are was were be been being it its this
  that these those i me my we our you your he she they them their his her there here what which who whom
  how when where why can could would should will shall may might must do does did done please want need
  some any all each every into onto about as so than then just also very get got let lets make via using
  use one two new`.split(/\s+/),
);

/** Splits `issue_write`, `getFileContents`, `get-env` and prose into lower-case words. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0);
}

/** A word as it is indexed and queried: stop words dropped, the rest stemmed. */
export function normalizeTerm(word: string): string | null {
  if (STOP_WORDS.has(word) || (word.length < 2 && !/\d/.test(word))) return null;
  return stemmer(word);
}

/** Endings of a name that are a web address (`example.com`), not a file (`notes.md`). */
const WEB_ENDINGS = new Set(['com', 'org', 'net', 'io', 'dev', 'ai', 'app', 'gov', 'edu', 'co', 'uk', 'de']);

/**
 * What a need's paths and addresses say about it, as words the index knows: an address asks for the web, a
 * file name (`reports/revenue.md`, `notes.txt`) for a file, a folder (`project/`) for a directory. People name
 * the thing itself, not the kind of tool ("rename report.txt to report-2024.txt"), and the words around it
 * often belong to other toolsets (a report, an issue); a version (`1.4.0`), a mail address or an
 * `owner/repo` is neither. They are added to the query at RankWeights.path.
 */
export function pathWords(query: string): string[] {
  return readPaths(query).hints;
}

/**
 * The need with its paths and addresses taken out (their words name a thing, not the kind of work: the folder
 * `project/` is not a project board), and the words they add (pathWords).
 */
export function readPaths(query: string): { text: string; hints: string[] } {
  const words = new Set<string>();
  const kept: string[] = [];
  for (const raw of query.split(/\s+/)) {
    const hint = pathHint(raw);
    if (hint) for (const w of hint) words.add(w);
    else kept.push(raw);
  }
  return { text: kept.join(' '), hints: [...words] };
}

/** What one word of a need says as a path or address, if it is one. */
function pathHint(raw: string): string[] | undefined {
  const token = raw.replace(/^[("'`[<]+|[)"'`\]>,.;:!?]+$/g, '');
  if (token.length < 3 || token.includes('@')) return undefined;
  if (/^https?:\/\//i.test(token)) return ['web', 'page'];
  const host = /^([\w-]+\.)+([a-z]{2,4})(\/|$)/i.exec(token);
  if (host && WEB_ENDINGS.has(host[2].toLowerCase())) return ['web', 'page'];
  if (/^[\w./~-]*[\w-]\.[a-z][a-z0-9]{0,4}$/i.test(token)) return ['file'];
  if (/^[\w.~-]+\/$/.test(token)) return ['directory'];
  return undefined;
}

interface Doc {
  id: string;
  toolset: string;
  tool: string | null;
  name: string;
  text: string;
  keywords?: string;
  learned?: string;
  params?: string;
}

/** Bounds on what schemaText reads of a schema: nesting, properties per object, characters per description. */
const SCHEMA_DEPTH = 4;
const SCHEMA_PROPERTIES = 50;
const SCHEMA_DESCRIPTION = 500;

/**
 * The words of a tool's input JSON Schema: each property's name and description and its named values (`enum`),
 * nested objects and arrays included, bounded. A tool's parameters say what it works on ("labels", "state:
 * open or closed", "get_workflow_run_logs") in words its one-line description leaves out.
 */
export function schemaText(schema: unknown, depth = 0): string {
  if (depth > SCHEMA_DEPTH || typeof schema !== 'object' || schema === null) return '';
  const { properties, items } = schema as { properties?: unknown; items?: unknown };
  const parts: string[] = [];
  const props = typeof properties === 'object' && properties !== null ? Object.entries(properties) : [];
  for (const [name, prop] of props.slice(0, SCHEMA_PROPERTIES)) {
    const { description, enum: values } = (prop ?? {}) as { description?: unknown; enum?: unknown };
    parts.push(name);
    if (typeof description === 'string') parts.push(description.slice(0, SCHEMA_DESCRIPTION));
    if (Array.isArray(values))
      parts.push(...values.filter((v) => typeof v === 'string').slice(0, SCHEMA_PROPERTIES));
    parts.push(schemaText(prop, depth + 1));
  }
  parts.push(schemaText(items, depth + 1));
  return parts.filter((p) => p.length > 0).join(' ; ');
}

/**
 * How the scores of a toolset's documents combine; the defaults were chosen on the tuning half of the discovery
 * needs (tests/fixtures/discovery/needs.json), in the middle of the range that scores best there.
 */
export interface RankWeights {
  /**
   * Field boosts: a tool's or toolset's name, its description, the toolset's keywords, the tool's parameters
   * (the tuning needs score the same for parameters weighted 0.3 to 1.5: 1, as much as a description), and the
   * terms learned from use (below the keywords an operator wrote: usage hints, it does not overrule).
   */
  name: number;
  text: number;
  keywords: number;
  params: number;
  learned: number;
  /** The weight of the words a need's paths and addresses add (pathWords): a hint, less than a word said. */
  path: number;
  /** How much the toolset's own id and description add to the score of its best tool. */
  toolset: number;
  /** Toolsets scoring below this share of the best one are left out of a ranked listing. */
  cutoff: number;
  /**
   * The first hit is certain when it scores at least this many times the second (or is alone): the smallest
   * margin, in steps of 0.02, at which no tuning need's first hit was wrong (1.8: 109 of the 133 tuning needs
   * certain, none wrong; 1.78 let one wrong one through). Used to activate a toolset for a task before its first
   * model call.
   */
  certainty: number;
}

/** The weights used unless a caller passes its own. */
export const DEFAULT_WEIGHTS: RankWeights = {
  name: 1,
  text: 1,
  keywords: 1.5,
  params: 1,
  learned: 0.75,
  path: 0.5,
  toolset: 1.2,
  cutoff: 0.2,
  certainty: 1.8,
};
/** Tools listed per toolset as "matched". */
const MATCHED_TOOLS = 5;

/** A search index over a catalog; rebuild it when the catalog changes (it is cheap: 200 tools in a few ms). */
export class ToolsetIndex {
  private readonly index = new MiniSearch<Doc>({
    fields: ['name', 'text', 'keywords', 'params', 'learned'],
    storeFields: ['toolset', 'tool'],
    tokenize,
    // Learned terms are stored stemmed (stemming twice is not stemming once: "releas" → "relea").
    processTerm: (term, field) => (field === 'learned' ? term : normalizeTerm(term)),
  });

  private readonly weights: RankWeights;

  constructor(toolsets: readonly SearchableToolset[], weights: RankWeights = DEFAULT_WEIGHTS) {
    this.weights = weights;
    const docs: Doc[] = [];
    for (const ts of toolsets) {
      docs.push({
        id: `toolset:${ts.id}`,
        toolset: ts.id,
        tool: null,
        name: ts.id,
        text: ts.description,
        keywords: (ts.keywords ?? []).join(' ; '),
        learned: (ts.learned ?? []).join(' '),
      });
      for (const tool of ts.tools) {
        docs.push({
          id: `tool:${ts.id}:${tool.name}`,
          toolset: ts.id,
          tool: tool.name,
          name: tool.name,
          text: tool.description,
          params: schemaText(tool.parameters),
        });
      }
    }
    this.index.addAll(docs);
  }

  /** Toolsets that match `query`, best first, each with its matching tools; [] when nothing matches. */
  search(query: string, limit = 10): ToolsetHit[] {
    const w = this.weights;
    const { text, hints } = readPaths(query);
    const own = tokenize(text).filter((t) => normalizeTerm(t) !== null).length;
    const results = this.index.search([text, ...hints].join(' '), {
      boost: { name: w.name, text: w.text, keywords: w.keywords, params: w.params, learned: w.learned },
      boostTerm: (_term, i) => (i >= own ? w.path : 1),
      combineWith: 'OR',
    });
    const byToolset = new Map<string, { own: number; tools: { name: string; score: number }[] }>();
    for (const r of results) {
      const entry = byToolset.get(r.toolset) ?? { own: 0, tools: [] };
      if (r.tool === null) entry.own = r.score;
      else entry.tools.push({ name: r.tool, score: r.score });
      byToolset.set(r.toolset, entry);
    }
    const hits: ToolsetHit[] = [];
    for (const [id, { own, tools }] of byToolset) {
      tools.sort((a, b) => b.score - a.score);
      // The best tool decides, plus the toolset's own description; counting more matching tools favoured
      // big toolsets over the right one on the test set.
      const best = tools[0]?.score ?? 0;
      const score = best + w.toolset * own;
      const floor = best * 0.5;
      hits.push({
        id,
        score: Math.round(score * 1000) / 1000,
        matched_tools: tools
          .filter((t) => t.score >= floor)
          .slice(0, MATCHED_TOOLS)
          .map((t) => t.name),
      });
    }
    hits.sort((a, b) => b.score - a.score || a.id.localeCompare(b.id));
    const top = hits[0]?.score ?? 0;
    if (hits[0] && top > 0 && top >= w.certainty * (hits[1]?.score ?? 0)) hits[0].certain = true;
    return hits.filter((h) => h.score >= top * w.cutoff).slice(0, limit);
  }
}

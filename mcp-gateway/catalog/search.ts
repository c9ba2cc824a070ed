import MiniSearch from 'minisearch';
import { stemmer } from 'stemmer';

// Discovery: rank toolsets, and the tools inside them, for a plain-language need ("open an issue on a
// repository"). BM25 (minisearch) over toolset ids and descriptions and tool names and descriptions,
// with snake_case/camelCase names split into words and every word stemmed (stemmer), so "issues",
// "issue_write" and "Issue" meet.

/** What the index is built from: each toolset with the tools it offers (or will offer). */
export interface SearchableToolset {
  id: string;
  description: string;
  /** The toolset file's `keywords`: how people ask for its work (discovery only). */
  keywords?: readonly string[];
  /** Terms learned from use (catalog/learned.ts), already stemmed; ranked below `keywords`, never shown. */
  learned?: readonly string[];
  tools: { name: string; description: string }[];
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
  const words = new Set<string>();
  for (const raw of query.split(/\s+/)) {
    const token = raw.replace(/^[("'`[<]+|[)"'`\]>,.;:!?]+$/g, '');
    if (token.length < 3 || token.includes('@')) continue;
    if (/^https?:\/\//i.test(token)) {
      words.add('web').add('page');
      continue;
    }
    const host = /^([\w-]+\.)+([a-z]{2,4})(\/|$)/i.exec(token);
    if (host && WEB_ENDINGS.has(host[2].toLowerCase())) {
      words.add('web').add('page');
      continue;
    }
    if (/^[\w./~-]*[\w-]\.[a-z][a-z0-9]{0,4}$/i.test(token)) words.add('file');
    else if (/^[\w.~-]+\/$/.test(token)) words.add('directory');
  }
  return [...words];
}

interface Doc {
  id: string;
  toolset: string;
  tool: string | null;
  name: string;
  text: string;
  keywords?: string;
  learned?: string;
}

/**
 * How the scores of a toolset's documents combine; the defaults were chosen on the tuning half of the discovery
 * needs (tests/fixtures/discovery/needs.json), in the middle of the range that scores best there.
 */
export interface RankWeights {
  /**
   * Field boosts: a tool's or toolset's name, its description, the toolset's keywords, and the terms learned
   * from use (below the keywords an operator wrote: usage hints, it does not overrule).
   */
  name: number;
  text: number;
  keywords: number;
  learned: number;
  /** The weight of the words a need's paths and addresses add (pathWords): a hint, less than a word said. */
  path: number;
  /** How much the toolset's own id and description add to the score of its best tool. */
  toolset: number;
  /** Toolsets scoring below this share of the best one are left out of a ranked listing. */
  cutoff: number;
  /**
   * The first hit is certain when it scores at least this many times the second (or is alone): the smallest
   * margin at which no tuning need's first hit was wrong (2: 108 of the 133 tuning needs certain, none wrong;
   * 1.5 let one wrong one through). Used to activate a toolset for a task before its first model call.
   */
  certainty: number;
}

/** The weights used unless a caller passes its own. */
export const DEFAULT_WEIGHTS: RankWeights = {
  name: 1,
  text: 1,
  keywords: 1.5,
  learned: 0.75,
  path: 0.5,
  toolset: 1.2,
  cutoff: 0.2,
  certainty: 2,
};
/** Tools listed per toolset as "matched". */
const MATCHED_TOOLS = 5;

/** A search index over a catalog; rebuild it when the catalog changes (it is cheap: 200 tools in a few ms). */
export class ToolsetIndex {
  private readonly index = new MiniSearch<Doc>({
    fields: ['name', 'text', 'keywords', 'learned'],
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
        });
      }
    }
    this.index.addAll(docs);
  }

  /** Toolsets that match `query`, best first, each with its matching tools; [] when nothing matches. */
  search(query: string, limit = 10): ToolsetHit[] {
    const w = this.weights;
    const own = tokenize(query).filter((t) => normalizeTerm(t) !== null).length;
    const results = this.index.search([query, ...pathWords(query)].join(' '), {
      boost: { name: w.name, text: w.text, keywords: w.keywords, learned: w.learned },
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

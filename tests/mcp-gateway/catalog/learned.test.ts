import { describe, expect, it } from 'vitest';
import {
  creditsOf,
  decayed,
  LEARNING,
  type LearnedTerm,
  type LearnRow,
  queryTerms,
  rankedTerms,
  sameTerms,
} from '../../../mcp-gateway/catalog/learned.ts';
import { normalizeTerm, ToolsetIndex } from '../../../mcp-gateway/catalog/search.ts';

// Discovery that learns from use, its pure part: which audit rows of a task credit a toolset with a LIST
// query's words, how a credit decays, which terms rank, and how little a learned term weighs in the index.

const owner = (tool: string) => ({ send_mail: 'mail', read_inbox: 'mail', create_issue: 'tracker' })[tool];
let id = 0;
const row = (kind: string, subject: string, forUser: string | null = null): LearnRow => ({
  id: ++id,
  kind,
  subject,
  for_user: forUser,
});
const DAY = 86_400_000;

describe('the credits of a task', () => {
  it('credits the last LIST before an activation to the toolset, at its first successful call', () => {
    const rows = [
      row('list', 'post a letter to the team'),
      row('activate', 'mail'),
      row('list', 'file a ticket'),
      row('activate', 'tracker'),
      row('call', 'create_issue'),
      row('call', 'send_mail'),
      row('call', 'read_inbox'),
    ];
    expect(creditsOf(rows, owner)).toEqual([
      { toolset: 'tracker', terms: ['file', 'ticket'], callId: rows[4].id, user: '' },
      { toolset: 'mail', terms: ['post', 'letter', 'team'], callId: rows[5].id, user: '' },
    ]);
  });

  it('credits nothing without a LIST before the activation, a call after it, or a call of its tools', () => {
    expect(
      creditsOf([row('activate', 'mail'), row('list', 'post a letter'), row('call', 'send_mail')], owner),
    ).toEqual([]);
    expect(
      creditsOf([row('list', 'post a letter'), row('call', 'send_mail'), row('activate', 'mail')], owner),
    ).toEqual([]);
    expect(
      creditsOf([row('list', 'post a letter'), row('activate', 'mail'), row('call', 'create_issue')], owner),
    ).toEqual([]);
    // A tool the catalog no longer has credits nothing.
    expect(
      creditsOf([row('list', 'post a letter'), row('activate', 'mail'), row('call', 'gone')], owner),
    ).toEqual([]);
  });

  it('credits a task once per toolset, however often it repeats itself', () => {
    const rows = [row('list', 'post a letter'), row('activate', 'mail')];
    for (let i = 0; i < 5; i++)
      rows.push(row('list', 'delete everything'), row('activate', 'mail'), row('call', 'send_mail'));
    expect(creditsOf(rows, owner)).toEqual([
      { toolset: 'mail', terms: ['post', 'letter'], callId: rows[4].id, user: '' },
    ]);
  });

  it('takes at most LEARNING.termsPerQuery words of a query, stemmed, stop words dropped, each once', () => {
    const words = Array.from({ length: 30 }, (_, i) => `word${String.fromCharCode(97 + (i % 26))}${i}`);
    expect(queryTerms(words.join(' '))).toHaveLength(LEARNING.termsPerQuery);
    expect(queryTerms('the Letters and letter, please')).toEqual([normalizeTerm('letters')]);
  });
});

describe('the learned terms that rank', () => {
  const term = (
    t: string,
    weight: number,
    tasks: number,
    at = 0,
    who = { users: 1, last_user: '' },
  ): LearnedTerm => ({
    toolset_id: 'mail',
    term: t,
    weight,
    tasks,
    ...who,
    updated_at: at,
  });

  it('ranks a term only once two tasks credited it, and while it has not faded below use', () => {
    const rows = [term('letter', 2, 2), term('post', 1, 1), term('parcel', 5, 1)];
    expect(rankedTerms(rows, 0)).toEqual(new Map([['mail', ['letter']]]));
    // Two credits halve every 30 days: above one still after 29 days, below after 31.
    expect(rankedTerms(rows, 29 * DAY).get('mail')).toEqual(['letter']);
    expect(rankedTerms(rows, 31 * DAY).get('mail')).toBeUndefined();
    expect(decayed(8, 0, 60 * DAY)).toBeCloseTo(2);
  });

  it('ranks nothing one user taught alone, however many tasks; two users, or tasks of nobody in particular, do', () => {
    const mallory = { users: 1, last_user: 'user:mallory' };
    expect(rankedTerms([term('wipe', 20, 20, 0, mallory)], 0)).toEqual(new Map());
    expect(rankedTerms([term('wipe', 2, 2, 0, { users: 2, last_user: 'user:ann' })], 0)).toEqual(
      new Map([['mail', ['wipe']]]),
    );
    expect(rankedTerms([term('wipe', 2, 2)], 0)).toEqual(new Map([['mail', ['wipe']]]));
  });

  it('keeps at most LEARNING.termsPerToolset per toolset, the strongest', () => {
    const rows = Array.from({ length: 60 }, (_, i) => term(`t${i}`, 2 + i, 2));
    const ranked = rankedTerms(rows, 0).get('mail') ?? [];
    expect(ranked).toHaveLength(LEARNING.termsPerToolset);
    expect(ranked[0]).toBe('t59');
    expect(ranked).not.toContain('t0');
  });

  it('tells a change from the same terms', () => {
    const a = new Map([['mail', ['letter', 'post']]]);
    expect(sameTerms(a, new Map([['mail', ['letter', 'post']]]))).toBe(true);
    expect(sameTerms(a, new Map([['mail', ['letter']]]))).toBe(false);
    expect(sameTerms(a, new Map())).toBe(false);
  });
});

describe('learned terms in the index', () => {
  const toolsets = (learned: Record<string, string[]>) => [
    {
      id: 'mail',
      description: 'Send and read email.',
      tools: [{ name: 'send_mail', description: 'Send an email message.' }],
      learned: learned.mail,
    },
    {
      id: 'tracker',
      description: 'Work items of a project.',
      keywords: ['ticket'],
      tools: [{ name: 'create_issue', description: 'Create an issue.' }],
      learned: learned.tracker,
    },
  ];
  const stems = (...words: string[]) => words.map((w) => normalizeTerm(w) as string);

  it('lifts a toolset for a phrasing only use taught, stemmed once (not twice)', () => {
    expect(new ToolsetIndex(toolsets({})).search('post a letter to the releases list')).toEqual([]);
    const taught = new ToolsetIndex(toolsets({ mail: stems('post', 'letter', 'releases') }));
    expect(taught.search('post a letter to the releases list')[0]?.id).toBe('mail');
    // "releases" stems to "releas", which stemmed again would be "relea" and meet nothing.
    expect(taught.search('release')[0]?.id).toBe('mail');
  });

  it('weighs a learned term below a keyword the operator wrote', () => {
    const index = new ToolsetIndex(toolsets({ mail: stems('ticket') }));
    const [first, second] = index.search('ticket');
    expect(first.id).toBe('tracker');
    expect(second.id).toBe('mail');
    expect(second.score).toBeLessThan(first.score);
  });
});

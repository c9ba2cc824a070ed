import type { Config } from '../../../lib/config/config.ts';
import { type AllowList, parseAllowList } from '../../../lib/net/allow-list.ts';
import type { ProxyOptions } from '../../../lib/net/guarded-agent.ts';
import { type Resolver, systemResolver } from '../../../lib/net/resolve.ts';
import { FETCH_ALLOW_SETTING } from '../../guards/net/guarded-fetch.ts';
import type { ToolContext } from '../../kit/define.ts';
import { createHtmlConverter, type HtmlConverter, inlineConverter } from './html.ts';

// What the web tools take from the tool context. Every field is optional so a context built by hand (tests of
// other tools) still compiles; `webSettings` fills the defaults in one place.

/** What the web tools take beyond every tool's context: their settings and seams (see WebContext). */
export interface WebToolContext extends ToolContext {
  web?: WebContext;
}

/** The web tools' settings, as the tool-server fills them from config (tests pass their own). */
export interface WebContext {
  /** Brave Search API key; web_search explains how to set it when it is missing. */
  braveApiKey?: string;
  /** The HTTP client web_search calls the Brave API with (global fetch; msw mocks it in tests). */
  searchFetch?: typeof fetch;
  /** Name resolution for fetch_url (default: the system resolver); tests answer as a hostile DNS would. */
  resolve?: Resolver;
  /** FETCH_ALLOW_HOSTS, parsed (parseAllowList): hosts exempt from the address policy; empty by default. */
  allow?: AllowList;
  /** Total deadline of one fetch_url call (DNS, connects, redirects, body). */
  fetchTimeoutMs?: number;
  /** Cap on the decoded body fetch_url downloads. */
  fetchMaxBytes?: number;
  /** Deadline of one web_search call. */
  searchTimeoutMs?: number;
  /** Set only when FETCH_USE_PROXY=1: the proxy fetch_url goes through. */
  proxy?: ProxyOptions;
  /** Where HTML becomes markdown: the tool-server's worker pool; on the calling thread when absent. */
  converter?: HtmlConverter;
}

/** The defaults every deployment starts from (README, "Configuration"). */
export const WEB_DEFAULTS = {
  fetchTimeoutMs: 20_000,
  fetchMaxBytes: 5 * 1024 * 1024,
  searchTimeoutMs: 15_000,
  maxRedirects: 5,
  userAgent: 'Mozilla/5.0 (compatible; toolshift-fetch/0.1)',
} as const;

/** WebContext with its defaults applied and the allow-list parsed. */
export interface WebSettings {
  braveApiKey?: string;
  searchFetch: typeof fetch;
  resolve: Resolver;
  allow: AllowList;
  fetchTimeoutMs: number;
  fetchMaxBytes: number;
  searchTimeoutMs: number;
  proxy?: ProxyOptions;
  converter: HtmlConverter;
}

/** Resolves a context's web settings: what is not given takes its default (no allowed hosts, no proxy). */
export function webSettings(web: WebContext | undefined): WebSettings {
  return {
    braveApiKey: web?.braveApiKey,
    searchFetch: web?.searchFetch ?? ((input, init) => fetch(input, init)),
    resolve: web?.resolve ?? systemResolver,
    allow: web?.allow ?? parseAllowList([], FETCH_ALLOW_SETTING),
    fetchTimeoutMs: web?.fetchTimeoutMs ?? WEB_DEFAULTS.fetchTimeoutMs,
    fetchMaxBytes: web?.fetchMaxBytes ?? WEB_DEFAULTS.fetchMaxBytes,
    searchTimeoutMs: web?.searchTimeoutMs ?? WEB_DEFAULTS.searchTimeoutMs,
    proxy: web?.proxy,
    converter: web?.converter ?? inlineConverter,
  };
}

/** The web context the tool-server runs with, from config; a bad FETCH_ALLOW_HOSTS entry stops the start. */
export function webContextFrom(cfg: Config['tools']['web']): WebContext {
  return {
    braveApiKey: cfg.braveApiKey,
    allow: parseAllowList(cfg.allowHosts, FETCH_ALLOW_SETTING),
    fetchTimeoutMs: cfg.fetchTimeoutMs,
    fetchMaxBytes: cfg.fetchMaxBytes,
    proxy: cfg.proxy,
    converter: createHtmlConverter(),
  };
}

import type { Tool } from './define.ts';
import { fetchUrl } from './web-fetch.ts';
import { webSearch } from './web-search.ts';

/** The web_tools set, in the order the tool-server lists them. */
export const webTools: Tool[] = [webSearch, fetchUrl];

import type { Tool } from '../../kit/define.ts';
import type { WebToolContext } from './context.ts';
import { fetchUrl } from './fetch.ts';
import { webSearch } from './search.ts';

/** The web_tools set, in the order the tool-server lists them. */
export const webTools: Tool<WebToolContext>[] = [webSearch, fetchUrl];

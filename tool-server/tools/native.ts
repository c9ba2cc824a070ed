import type { Tool } from '../kit/define.ts';
import { databaseTools } from './database/tools.ts';
import { fileSystemTools } from './files/tools.ts';
import { gitTools } from './git/tools.ts';
import { webTools } from './web/tools.ts';

/** Every native tool the tool-server serves, in listing order: the one list the server and tests register. */
export const nativeTools: Tool[] = [...fileSystemTools, ...webTools, ...gitTools, ...databaseTools];

import { databaseTools } from './db-tools.ts';
import type { Tool } from './define.ts';
import { fileSystemTools } from './file-system.ts';
import { gitTools } from './git-tools.ts';
import { webTools } from './web-tools.ts';

/** Every native tool the tool-server serves, in listing order: the one list the server and tests register. */
export const nativeTools: Tool[] = [...fileSystemTools, ...webTools, ...gitTools, ...databaseTools];

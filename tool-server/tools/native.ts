import type { Tool } from '../kit/define.ts';
import { type DatabaseToolContext, databaseTools } from './database/tools.ts';
import { fileSystemTools } from './files/tools.ts';
import type { GitToolContext } from './git/context.ts';
import { gitTools } from './git/tools.ts';
import type { WebToolContext } from './web/context.ts';
import { webTools } from './web/tools.ts';

/** The context the native tools are called with: every tool's, and each family's settings (server.ts fills it). */
export type NativeContext = GitToolContext & WebToolContext & DatabaseToolContext;

/** Every native tool the tool-server serves, in listing order: the one list the server and tests register. */
export const nativeTools: Tool<NativeContext>[] = [
  ...fileSystemTools,
  ...webTools,
  ...gitTools,
  ...databaseTools,
];

import type { Tool } from '../../kit/define.ts';
import { createDirectory, listAllowedDirectories, listDirectory, listDirectoryWithSizes } from './dirs.ts';
import { deleteDirectory, deleteFile, moveFile } from './manage.ts';
import { readMediaFile } from './media.ts';
import { getFileInfo, readMultipleFiles, readTextFile } from './read.ts';
import { directoryTree, searchFiles } from './walk.ts';
import { editFile, writeFile } from './write.ts';

/**
 * A file tool whose calls go through the path guard's lock: writes one at a time (no lost edit), reads
 * alongside them where descriptors are verified (see PathGuard.runFileTool).
 */
function underFileLock(tool: Tool): Tool {
  const changes = !tool.annotations.readOnlyHint;
  return { ...tool, run: (args, ctx) => ctx.paths.runFileTool(changes, () => tool.run(args, ctx)) };
}

/** The file_system_tools set, in the order the tool-server lists them. */
export const fileSystemTools: Tool[] = [
  readTextFile,
  readMultipleFiles,
  readMediaFile,
  writeFile,
  editFile,
  createDirectory,
  listDirectory,
  listDirectoryWithSizes,
  directoryTree,
  searchFiles,
  getFileInfo,
  moveFile,
  deleteFile,
  deleteDirectory,
  listAllowedDirectories,
].map(underFileLock);

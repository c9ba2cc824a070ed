import type { Tool } from './define.ts';
import { createDirectory, listAllowedDirectories, listDirectory, listDirectoryWithSizes } from './fs-dirs.ts';
import { deleteDirectory, deleteFile, moveFile } from './fs-manage.ts';
import { readMediaFile } from './fs-media.ts';
import { getFileInfo, readMultipleFiles, readTextFile } from './fs-read.ts';
import { directoryTree, searchFiles } from './fs-walk.ts';
import { editFile, writeFile } from './fs-write.ts';

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

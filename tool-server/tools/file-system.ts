import type { Tool } from './define.ts';
import { createDirectory, listAllowedDirectories, listDirectory, listDirectoryWithSizes } from './fs-dirs.ts';
import { deleteDirectory, deleteFile, moveFile } from './fs-manage.ts';
import { getFileInfo, readMultipleFiles, readTextFile } from './fs-read.ts';
import { directoryTree, searchFiles } from './fs-walk.ts';
import { editFile, writeFile } from './fs-write.ts';

/** The file_system_tools set, in the order the tool-server lists them. */
export const fileSystemTools: Tool[] = [
  readTextFile,
  readMultipleFiles,
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
];

import type { ScriptedTurn } from './mock-model.ts';

// The task every one of the concurrency run's tasks plays: activate the file tools, four cheap file-tool turns
// (deactivating with the last), answer — six model turns on the repository's own toolsets, as `npm start`
// serves them.

/** The script; the workspace holds notes.txt. */
export function concurrencyScript(): ScriptedTurn[] {
  const call = (id: string, name: string, args: Record<string, unknown>) => ({ id, name, arguments: args });
  return [
    { calls: [call('c0', 'manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })] },
    { calls: [call('c1', 'list_allowed_directories', {})] },
    { calls: [call('c2', 'read_text_file', { path: 'notes.txt' })] },
    { calls: [call('c3', 'get_file_info', { path: 'notes.txt' })] },
    {
      calls: [
        call('c4', 'list_directory', { path: '.' }),
        call('c5', 'manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['file_system_tools'] }),
      ],
    },
    { answer: 'notes.txt holds the meeting notes.' },
  ];
}

/** Model turns per task. */
export const CONCURRENCY_TURNS = concurrencyScript().length;

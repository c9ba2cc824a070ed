import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadToolsetFiles } from '../../../mcp-gateway/catalog/toolset-files.ts';

// A toolset file's OAuth keys (backend.mcp.oauth, tool_scopes): read into the spec the gateway connects people
// with, and each way they can be wrong refused with the file, the line and what is valid.

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'oauth-files-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const HEAD = ['id: notes', 'description: Notes', 'backend:', '  mcp:'];

/** Loads one file of `lines` alone; its spec, or the error's message. */
async function load(lines: string[], vars: Record<string, string> = {}) {
  const sub = await mkdtemp(path.join(dir, 'case-'));
  await writeFile(path.join(sub, 'notes.yaml'), `${lines.join('\n')}\n`);
  try {
    return loadToolsetFiles(sub, vars)[0];
  } catch (err) {
    return (err as Error).message;
  }
}

describe('an oauth toolset file', () => {
  it('reads its scopes, client and tool_scopes, the client secret from a declared variable', async () => {
    const spec = await load(
      [
        ...HEAD,
        '    url: https://notes.example/mcp',
        '    oauth:',
        '      scopes: [profile]',
        '      client_id: toolshift',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the toolset file's own ${VAR}
        "      client_secret: '${NOTES_CLIENT_SECRET}'",
        '      revoke_on_deactivate: true',
        'variables: [NOTES_CLIENT_SECRET]',
        'tool_scopes:',
        '  write_note: [notes:write]',
      ],
      { NOTES_CLIENT_SECRET: 's3cret' },
    );
    expect(typeof spec === 'string' ? spec : spec.backend).toMatchObject({
      oauth: {
        resource: 'https://notes.example/mcp',
        scopes: ['profile'],
        client: { client_id: 'toolshift', client_secret: 's3cret' },
        revokeOnDeactivate: true,
        toolScopes: { write_note: ['notes:write'] },
      },
    });
  });

  it.each([
    [
      ['    command: notes-server', '    oauth: {}'],
      /notes\.yaml:\d+: backend\.mcp\.oauth: oauth is for url servers/,
    ],
    [
      ['    url: https://notes.example/mcp', 'tool_scopes:', '  whoami: [notes:read]'],
      /notes\.yaml:7: tool_scopes are for an oauth server/,
    ],
    [
      ['    url: https://notes.example/mcp', '    oauth:', "      scopes: ['two words']"],
      /notes\.yaml:7: backend\.mcp\.oauth\.scopes\.0: must be a scope/,
    ],
    [
      [
        '    url: https://notes.example/mcp',
        '    oauth:',
        '      client_id: x',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the toolset file's own ${VAR}
        "      client_secret: '${SECRET}'",
      ],
      /notes\.yaml:8: variable SECRET \(used in backend\.mcp\.oauth\.client_secret\) is not declared/,
    ],
    [
      [
        '    url: https://notes.example/mcp',
        '    headers:',
        '      Authorization: Bearer x',
        '    oauth: {}',
      ],
      /leave out the Authorization header/,
    ],
    [
      ['    url: https://notes.example/mcp', '    oauth:', '      client_secret: x'],
      /client_secret goes with client_id/,
    ],
  ])('refuses %j with the file and line', async (lines, message) => {
    expect(await load([...HEAD, ...lines])).toMatch(message);
  });
});

import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Tool } from '@modelcontextprotocol/server';
import { startRecordedServer } from './recorded-server.ts';

// The benchmark's catalog, written as toolset files into a temp TOOLSETS_DIR: the repository's own toolsets
// (native file, git, database and web tools; the memory and sequential-thinking servers from npm), the MCP
// reference "everything" server from npm, and the GitHub MCP server's 117 recorded definitions split into 13
// toolsets (tests/fixtures/discovery/github), served by the recorded-catalog backend and labelled as recorded.

/** The label every recorded toolset's description ends with. */
export const RECORDED_LABEL = '(Recorded definitions: listing only, calls are not served.)';

// The toolset id is not the server's name ("everything"): a word that common in needs would rank it first.
const REFERENCE = `id: mcp_reference
description: >-
  The MCP reference test server: echo a message, add two numbers, get structured weather content,
  a tiny image, annotated messages, resource links and references, environment variables.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`;

const yamlFiles = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => [f, readFileSync(path.join(dir, f), 'utf8')] as const);

/** The recorded GitHub definitions (tests/fixtures/recorded/github-mcp-server-tools.json). */
export function recordedGithubTools(): Tool[] {
  const file = path.resolve('tests/fixtures/recorded/github-mcp-server-tools.json');
  return (JSON.parse(readFileSync(file, 'utf8')) as { tools: Tool[] }).tools;
}

/** Writes the toolset files into `dir` and starts the recorded backend they point at. */
export async function writeBenchCatalog(dir: string) {
  const recorded = await startRecordedServer(recordedGithubTools());
  await mkdir(dir, { recursive: true });
  for (const [name, text] of yamlFiles(path.resolve('toolsets'))) await writeFile(path.join(dir, name), text);
  await writeFile(path.join(dir, 'mcp_reference.yaml'), REFERENCE);
  const github = yamlFiles(path.resolve('tests/fixtures/discovery/github'));
  for (const [name, text] of github) {
    const labelled = text
      .replace(/^description: "(.*)"$/m, (_, d: string) => `description: "${d} ${RECORDED_LABEL}"`)
      .replace(`\${GITHUB_FIXTURE_URL}`, recorded.url);
    if (!labelled.includes(RECORDED_LABEL)) throw new Error(`bench catalog: no description line in ${name}`);
    await writeFile(path.join(dir, name), labelled);
  }
  return { recordedUrl: recorded.url, close: recorded.close };
}

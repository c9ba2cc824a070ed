import { parseArgs } from 'node:util';
import { COMMAND_HELP } from '../cli/help.ts';

// What the `toolshift` command runs once bin/toolshift.js has checked the Node version: `toolshift serve`
// starts the daemon (all three services, or the one named), anything else is the CLI (client.ts). The daemon
// and the CLI are imported only when asked for, so a CLI command loads none of the services.

const SERVICES = ['agent-server', 'mcp-gateway', 'tool-server', 'agent-api', 'worker'] as const;

/** Parses `serve`'s arguments; a usage error is printed and ends the process with exit code 2. */
function serveArgs(argv: string[]): { service?: (typeof SERVICES)[number]; dataDir?: string } {
  const usage = (message: string): never => {
    process.stderr.write(`error: ${message}\nSee: toolshift help serve\n`);
    process.exit(2);
  };
  const options = { 'data-dir': { type: 'string' } } as const;
  let parsed: { positionals: string[]; values: { 'data-dir'?: string } };
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options });
  } catch (err) {
    return usage((err as Error).message.split('\n')[0]);
  }
  const [service, ...extra] = parsed.positionals;
  if (extra.length > 0) usage(`unexpected argument "${extra[0]}"`);
  if (service !== undefined && !(SERVICES as readonly string[]).includes(service))
    usage(`unknown service "${service}"; serve runs all three, or one of: ${SERVICES.join(', ')}`);
  const dataDir = parsed.values['data-dir'];
  if (dataDir !== undefined && dataDir.trim() === '') usage('--data-dir needs a directory');
  return { service: service as (typeof SERVICES)[number] | undefined, dataDir };
}

const argv = process.argv.slice(2);
if (argv[0] === 'serve' && !argv.includes('--help') && !argv.includes('-h')) {
  const { service, dataDir } = serveArgs(argv.slice(1));
  if (dataDir !== undefined) process.env.TOOLSHIFT_DATA_DIR = dataDir;
  // The agent-server's two halves, apart (several of each on one PostgreSQL database): AGENT_ROLE says which.
  if (service === 'agent-api') process.env.AGENT_ROLE = 'api';
  if (service === 'worker') process.env.AGENT_ROLE = 'worker';
  if (service === 'agent-server' || service === 'agent-api' || service === 'worker')
    await import('../agent-server/main.ts');
  else if (service === 'mcp-gateway') await import('../mcp-gateway/main.ts');
  else if (service === 'tool-server') await import('../tool-server/main.ts');
  else await import('./start.ts');
} else if (argv[0] === 'serve') {
  process.stdout.write(COMMAND_HELP.serve);
} else {
  const { main } = await import('../client.ts');
  const { processIo } = await import('../cli/process-io.ts');
  process.exitCode = await main(argv, processIo());
}

import path from 'node:path';
import { addressesFile, recordListening } from '../lib/config/addresses.ts';
import { type Config, checkRootsExist } from '../lib/config/config.ts';
import { installationDir } from '../lib/config/installation.ts';
import { securityFor } from '../lib/http/security.ts';
import { type Listening, listen } from '../lib/http/serve.ts';
import { createLogger } from '../lib/telemetry/log.ts';
import { createMetrics, observeToolCall } from '../lib/telemetry/metrics.ts';
import { startServiceTracing } from '../lib/telemetry/trace-setup.ts';
import { createToolServerApp, localToolServer } from './app.ts';
import { createCallRecord } from './call-record.ts';
import type { ToolServerLocal } from './contract.ts';
import { PathGuard } from './guards/paths/guard.ts';
import type { Tool } from './kit/define.ts';
import { createRegistry } from './registry.ts';
import { createDbRunner } from './tools/database/runner.ts';
import { nativeTools } from './tools/native.ts';
import { webContextFrom } from './tools/web/context.ts';

/**
 * Builds the tool-server from config and listens; used by main.ts and by start.ts. `extraTools` are served
 * beside the native ones (the benchmark's echo and fixed-delay probes); `announce: false` (start/start.ts, which
 * prints one ready line for the three services) logs where it listens at debug only.
 */
export async function startToolServer(
  config: Config,
  opts: { extraTools?: readonly Tool[]; announce?: boolean } = {},
): Promise<Listening & { local: ToolServerLocal }> {
  const log = createLogger('tool-server', config.logLevel, undefined, config.logFormat);
  const tracing = await startServiceTracing('tool-server', config, log);
  const security = securityFor(config, 'tool-server');
  checkRootsExist(config.tools);
  const paths = await PathGuard.create({
    roots: config.tools.roots,
    readOnlyRoots: config.tools.readOnlyRoots,
    // The running installation, and the daemon's own configuration and data: no file tool changes them,
    // even where a root covers them (a root configured inside the installation stays writable).
    installation: installationDir(),
    // The tokens and keys the daemon runs with — generated, or in its .env — are not even readable: a model
    // could send them out in a URL or a search query.
    secretPaths: [config.auth.credentialsFile, path.resolve('.env')],
    protectedPaths: [
      config.gateway.toolsetsDir,
      config.gateway.userToolsetsDir,
      config.gateway.promptsDir,
      config.gateway.policyFile,
      config.dataDir,
      // Where the CLI sends the stored tokens: a model that changed it could have them sent elsewhere.
      addressesFile(config.auth.credentialsFile),
      path.resolve('.env'),
    ],
  });
  // Query processes start on the first database call; close() below kills them.
  const databases = createDbRunner();
  const metrics = createMetrics({ processMetrics: true });
  const registry = createRegistry([...nativeTools, ...(opts.extraTools ?? [])]);
  const deps = {
    registry: {
      ...registry,
      call: (name: string, args: unknown, ctx: Parameters<typeof registry.call>[2]) =>
        observeToolCall(metrics, name, () => registry.call(name, args, ctx)),
    },
    metrics,
    context: {
      paths,
      maxReadBytes: config.tools.maxReadBytes,
      web: webContextFrom(config.tools.web),
      git: config.tools.git,
      github: config.tools.github,
      databases: { ...config.tools.databases, runner: databases },
    },
    log,
    security,
    // One record of keyed calls for both ways in (the app's routes, a gateway in this process).
    calls: createCallRecord(),
  };
  const app = createToolServerApp(deps);
  const listening = await listen(app, config.tools.port, config.host, 'TOOL_SERVER_PORT', config.http.limits);
  await recordListening(config, 'tool-server', listening.url, log);
  log[opts.announce === false ? 'debug' : 'info'](
    { url: listening.url, roots: paths.allowed() },
    'tool-server listening',
  );
  return {
    ...listening,
    local: localToolServer(deps),
    close: async () => {
      databases.close();
      await listening.close();
      await tracing?.shutdown();
    },
  };
}

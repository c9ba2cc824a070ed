import { loadConfig } from '../lib/config.ts';
import { withCredentials } from '../lib/credentials.ts';
import { runService } from '../lib/run-service.ts';
import { startGateway } from './server.ts';

await runService('mcp-gateway', () => startGateway(withCredentials(loadConfig())));

import { loadConfig } from '../lib/config/config.ts';
import { withCredentials } from '../lib/config/credentials.ts';
import { runService } from '../lib/http/run-service.ts';
import { startGateway } from './server.ts';

await runService('mcp-gateway', () => startGateway(withCredentials(loadConfig())));

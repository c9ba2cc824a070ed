import { loadConfig } from '../lib/config/config.ts';
import { withCredentials } from '../lib/config/credentials.ts';
import { runService } from '../lib/http/run-service.ts';
import { startAgentServer } from './server.ts';

await runService('agent-server', () => startAgentServer(withCredentials(loadConfig())));

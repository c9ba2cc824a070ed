import { loadConfig } from '../lib/config.ts';
import { withCredentials } from '../lib/credentials.ts';
import { runService } from '../lib/run-service.ts';
import { startAgentServer } from './server.ts';

await runService('agent-server', () => startAgentServer(withCredentials(loadConfig())));

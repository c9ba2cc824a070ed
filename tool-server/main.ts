import { loadConfig } from '../lib/config.ts';
import { withCredentials } from '../lib/credentials.ts';
import { runService } from '../lib/run-service.ts';
import { startToolServer } from './server.ts';

await runService('tool-server', () => startToolServer(withCredentials(loadConfig())));

import { loadConfig } from '../lib/config/config.ts';
import { withCredentials } from '../lib/config/credentials.ts';
import { runService } from '../lib/http/run-service.ts';
import { startToolServer } from './server.ts';

await runService('tool-server', () => startToolServer(withCredentials(loadConfig())));

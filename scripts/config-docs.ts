import { writeFileSync } from 'node:fs';
import { configurationReference, envExample } from '../lib/config/config-docs.ts';

// `npm run config:docs`: writes docs/configuration.md and .env.example from lib/config/config-docs.ts.
writeFileSync('docs/configuration.md', configurationReference());
writeFileSync('.env.example', envExample());
process.stdout.write('wrote docs/configuration.md and .env.example\n');

#!/usr/bin/env node
// The `toolshift` command (package.json "bin"): runs client.ts through tsx, so a clone needs no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../client.ts');
const { processIo } = await import('../cli/process-io.ts');
process.exitCode = await main(process.argv.slice(2), processIo());

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { configurationReference, envExample, undocumentedSettings } from '../../lib/config/config-docs.ts';

// The configuration reference and .env.example are written from the schema and lib/config/config-docs.ts; they fail
// here when they drift (run `npm run config:docs`), and so does a variable nobody described.

describe('the configuration reference', () => {
  it('describes every variable the schema reads, and nothing it does not', () => {
    expect(undocumentedSettings()).toEqual({ undocumented: [], unknown: [] });
  });

  it('docs/configuration.md and .env.example are what npm run config:docs writes', () => {
    expect(readFileSync('docs/configuration.md', 'utf8')).toBe(configurationReference());
    expect(readFileSync('.env.example', 'utf8')).toBe(envExample());
  });

  it('.env.example, copied as it is, is a valid configuration with the defaults', () => {
    const env: Record<string, string> = {};
    for (const line of envExample().split('\n')) {
      const m = /^([A-Za-z_]+)=(.*)$/.exec(line);
      if (m) env[m[1]] = m[2];
    }
    expect(Object.keys(env)).toEqual(['OPENAI_BASE_URL', 'OPENAI_API_KEY']);
    expect(() => loadConfig(env)).not.toThrow();
    // Each commented default, uncommented, is accepted too.
    const all: Record<string, string> = {};
    for (const line of envExample().split('\n')) {
      const m = /^# ([A-Za-z_]+)=(.+)$/.exec(line);
      if (m) all[m[1]] = m[2];
    }
    expect(Object.keys(all).length).toBeGreaterThan(40);
    expect(() => loadConfig(all)).not.toThrow();
  });
});

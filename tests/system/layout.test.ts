import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// tests/ mirrors the code and each of its folders is a vitest project (vitest.config.ts): a test file left at
// the top of tests/ would belong to no project and never run.

describe('the tests’ layout', () => {
  it('keeps no test file at the top of tests/ (it would run in no project)', () => {
    const stray = readdirSync('tests').filter((name) => name.endsWith('.test.ts'));
    expect(stray, 'move these into tests/<service>/, tests/cli, tests/lib or tests/system').toEqual([]);
  });
});

import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// A clone from a public host holds only this repository: nothing the project runs, tests, benchmarks or
// documents may point at a folder beside it (the design notes and recorded data it needs are copied in,
// under docs/ and tests/fixtures/recorded/, with their source noted).
const SIBLING = ['..', 'shared'].join('/');

describe('the repository is self-contained', () => {
  it('names no folder outside its own tree', () => {
    let hits = '';
    try {
      hits = execFileSync('git', ['grep', '-n', '-F', SIBLING, '--', '.', ':!.ci/run'], { encoding: 'utf8' });
    } catch (err) {
      // git grep exits 1 when nothing matches: that is the pass.
      if ((err as { status?: number }).status !== 1) throw err;
    }
    expect(hits).toBe('');
  });
});

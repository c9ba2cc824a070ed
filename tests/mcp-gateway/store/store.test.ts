import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../lib/sqlite.ts';
import { createGatewayStore, type GatewayStore } from '../../../mcp-gateway/store/store.ts';

// The gateway keeps sessions' active toolsets and the disabled set in memory: what it answers must still
// follow the file when another connection changes it (a second gateway on the same data dir, an operator).

let dir: string;
let a: GatewayStore;
let b: GatewayStore;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'toolshift-gwstore-'));
  a = createGatewayStore(openDatabase(path.join(dir, 'gateway.db')));
  b = createGatewayStore(openDatabase(path.join(dir, 'gateway.db')));
});
afterEach(async () => {
  a.close();
  b.close();
  await rm(dir, { recursive: true, force: true });
});

describe('gateway store kept in memory', () => {
  it('follows its own changes', () => {
    a.ensureSession('s1', ['fs']);
    expect(a.activeToolsets('s1')).toEqual(['fs']);
    a.activate('s1', ['web']);
    expect(a.activeToolsets('s1')).toEqual(['fs', 'web']);
    a.deactivate('s1', ['fs']);
    expect(a.activeToolsets('s1')).toEqual(['web']);
    a.setEnabled('web', false);
    expect([...a.disabledToolsets()]).toEqual(['web']);
    expect(a.activeToolsets('s1')).toEqual([]);
  });

  it('sees what another connection to the same file changed, at its next read', () => {
    a.ensureSession('s1', ['fs']);
    expect(a.activeToolsets('s1')).toEqual(['fs']);
    expect([...a.disabledToolsets()]).toEqual([]);
    b.activate('s1', ['git']);
    b.setEnabled('fs', false);
    expect(a.activeToolsets('s1')).toEqual(['git']);
    expect([...a.disabledToolsets()]).toEqual(['fs']);
    b.setEnabled('fs', true);
    expect([...a.disabledToolsets()]).toEqual([]);
    // Its own audit rows (another table) do not make it drop what it keeps, and are never lost either.
    a.audit({ session_id: 's1', kind: 'call', subject: 'read_text_file', ok: true });
    expect(a.listAudit({ limit: 5 }).audit.map((r) => r.subject)).toEqual(['read_text_file']);
  });
});

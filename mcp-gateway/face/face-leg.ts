import type { Prompt } from '@modelcontextprotocol/server';
import { LIMITS } from '../../lib/http/limits.ts';
import type { Gateway } from '../core/gateway.ts';
import { HandleError, type HandleStore } from './handles.ts';
import type { LegacyConnection } from './legacy-sessions.ts';
import { checkLength } from './meta-tools.ts';

// One leg of the MCP face as its handlers see it (server-factory.ts builds one per request or legacy session):
// which leg it is, and the gateway session it acts in.

/** Playbook prompts as the face serves them (prompts.ts implements it). */
export interface PromptSource {
  list(): Prompt[];
  render(name: string, args: Record<string, string>): { description?: string; text: string };
}

/** Which leg a server instance serves. */
export type FaceMode =
  /** 2026-07-28: no protocol session; state is a handle bound to `credential`. */
  | { kind: 'modern'; credential: string | null }
  /** 2025-era: one connection per MCP session, acting in its handle's gateway session once it has one; `changed` sends it list_changed. */
  | { kind: 'legacy'; conn: LegacyConnection; changed: () => void }
  /** A fixed view: exactly these toolsets' tools, no meta-tool. */
  | { kind: 'view'; toolsets: string[]; sessionId: string };

export type LegacyMode = Extract<FaceMode, { kind: 'legacy' }>;

/** What the factory needs. */
export interface FaceDeps {
  gateway: Gateway;
  handles: HandleStore;
  prompts?: PromptSource;
  /** Tells the legacy connections acting in a handle that its toolsets changed, whichever connection changed them. */
  handleChanged: (handle: string) => Promise<void> | void;
}

/** What every handler of one Server instance shares. */
export interface FaceLeg {
  deps: FaceDeps;
  mode: FaceMode;
  gateway: Gateway;
  /**
   * The gateway session of a legacy or view server. A legacy connection acts in its handle's session once it
   * has one (the handle checked and its lifetime refreshed); a handle that expired is let go, the connection
   * is back on its own session, and a `strict` caller (a tool call) hears why instead.
   */
  session(strict?: boolean): Promise<string>;
}

export function faceLeg(deps: FaceDeps, mode: FaceMode): FaceLeg {
  const session = async (strict = false): Promise<string> => {
    if (mode.kind === 'view') return mode.sessionId;
    if (mode.kind !== 'legacy') return '';
    const { conn } = mode;
    const handle = conn.handle;
    if (handle === undefined) return conn.ownSession;
    try {
      return await deps.handles.use(handle, conn.credential);
    } catch (err) {
      if (!(err instanceof HandleError)) throw err;
      await conn.bind(undefined);
      mode.changed();
      if (strict) throw err;
      return conn.ownSession;
    }
  };
  return { deps, mode, gateway: deps.gateway, session };
}

/**
 * A legacy connection takes the handle a client named (from any earlier connection of its credential): it
 * acts in that handle's session from now on. An unknown, expired or foreign handle is refused.
 */
export async function adopt(leg: FaceLeg, legacy: LegacyMode, given: unknown): Promise<string> {
  if (typeof given !== 'string') throw new HandleError('`session` must be a string handle');
  checkLength('session', given, LIMITS.sessionId);
  const handle = await leg.deps.handles.use(given, legacy.conn.credential);
  if (legacy.conn.handle !== handle) {
    await legacy.conn.bind(handle);
    legacy.changed();
  }
  return handle;
}

/** Whether a legacy call names a handle (an empty string, as some clients fill optional fields, does not). */
export const named = (given: unknown) => given !== undefined && given !== '';

/**
 * The session's usable tools. A view shows only its own toolsets' tools, whatever else its gateway session
 * has active (that session is reachable by name over REST).
 */
export async function usable(leg: FaceLeg) {
  const { gateway, mode } = leg;
  const sessionId = await leg.session();
  const all = await gateway.tools(sessionId);
  return mode.kind === 'view' ? all.filter((t) => mode.toolsets.includes(t.toolset)) : all;
}

import type { LegacySessionStore } from './legacy-store.ts';

// What one legacy MCP session acts as: whose it is and which gateway session it acts in (its own, or a
// handle's once it changed its toolsets), kept in step with its stored row.

/** A legacy connection as the server factory sees it: whose it is, and which gateway session it acts in. */
export interface LegacyConnection {
  readonly credential: string | null;
  /** Its own gateway session: the defaults, never changed (a change of toolsets takes a handle first). */
  readonly ownSession: string;
  /** The handle it acts in, once it has one. */
  readonly handle: string | undefined;
  /** Acts in `handle` from now on (undefined: in its own session again), recorded with its stored row. */
  bind(handle: string | undefined): Promise<void>;
}

/** A legacy connection: the credential that opened it, its own gateway session, the handle it acts in. */
export class Connection implements LegacyConnection {
  /** The stored row's key, once the session is initialized. */
  key: string | undefined;
  #handle: string | undefined;

  readonly credential: string | null;
  readonly ownSession: string;
  private readonly store: LegacySessionStore;

  constructor(
    credential: string | null,
    ownSession: string,
    handle: string | undefined,
    store: LegacySessionStore,
  ) {
    this.credential = credential;
    this.ownSession = ownSession;
    this.store = store;
    this.#handle = handle;
  }

  get handle(): string | undefined {
    return this.#handle;
  }

  /** Takes the handle as stored (another gateway replica may have bound the session). */
  sync(handle: string | undefined): void {
    this.#handle = handle;
  }

  async bind(handle: string | undefined): Promise<void> {
    if (handle === this.#handle) return;
    this.#handle = handle;
    if (this.key !== undefined) await this.store.setHandle(this.key, handle ?? null);
  }
}

import { UpstreamError } from './upstream-types.ts';

// Who gets a shared backend's calls in flight when several sessions want them. One FIFO queue per server let
// one session's 80 parallel slow calls fill every place in flight and the whole queue, so every other
// session's call was refused at once. Here each session has its own bounded queue, holds at most its share of
// the places in flight, and a place that frees goes to the waiting session with the fewest calls in flight
// (round-robin among equals): a session that floods only ever waits behind itself, and another session's call
// starts as soon as one place frees. Memory stays bounded: each session's queue, and how many sessions may
// queue at once.

export interface FairSlotsOptions {
  /** How the backend is named in messages. */
  label: string;
  /** Calls in flight at once on the backend (UPSTREAM_MAX_CONCURRENT_CALLS). */
  slots: number;
  /** Calls in flight at once for one session (UPSTREAM_MAX_CALLS_PER_SESSION); at most `slots`. */
  perSession: number;
}

/** How many calls one session may have waiting, per call it may have in flight. */
export const QUEUE_FACTOR = 4;

interface Session {
  running: number;
  /** Its waiting calls, oldest first; each starts the call when called. */
  waiting: (() => void)[];
}

/** A backend's places for calls in flight, shared fairly between sessions. */
export class FairSlots {
  private readonly sessions = new Map<string, Session>();
  /** Sessions with a call waiting, in the order they are served among equals. */
  private readonly ready: string[] = [];
  private inFlight = 0;
  private readonly opts: FairSlotsOptions;

  constructor(opts: FairSlotsOptions) {
    this.opts = { ...opts, perSession: Math.max(1, Math.min(opts.perSession, opts.slots)) };
  }

  /** Calls in flight now, every session together. */
  get running(): number {
    return this.inFlight;
  }

  /** Calls waiting now, every session together. */
  get waiting(): number {
    let n = 0;
    for (const s of this.sessions.values()) n += s.waiting.length;
    return n;
  }

  /**
   * Takes a place for one call of `session`, waiting (within `timeoutMs`) while the backend or the session has
   * its fill; returns the function that gives it back. Refuses at once, with an UpstreamError saying the call did
   * not run, when the session's own queue is full or too many sessions are queued already.
   */
  async acquire(session: string, name: string, timeoutMs: number): Promise<() => void> {
    const { label, slots, perSession } = this.opts;
    const own = this.sessions.get(session) ?? { running: 0, waiting: [] };
    this.sessions.set(session, own);
    // A place is free only while every session still waiting holds its whole share: none is passed over.
    if (this.inFlight < slots && own.running < perSession) return this.start(session, own);
    if (own.waiting.length >= QUEUE_FACTOR * perSession) {
      throw new UpstreamError(
        `${label}: this session already has ${own.running} calls in flight and ${own.waiting.length} waiting ` +
          `on it, its limit (UPSTREAM_MAX_CALLS_PER_SESSION=${perSession} in flight, ${QUEUE_FACTOR} times as ` +
          `many waiting); ${name} was not sent and did not run — try again when one of them finishes`,
      );
    }
    if (own.waiting.length === 0 && this.ready.length >= QUEUE_FACTOR * slots) {
      this.forgetIfIdle(session, own);
      throw new UpstreamError(
        `${label} is busy: calls of ${this.ready.length} other sessions are waiting for it, the most that may ` +
          `(${QUEUE_FACTOR} times UPSTREAM_MAX_CONCURRENT_CALLS=${slots}); ${name} was not sent and did not run — ` +
          'try again shortly',
      );
    }
    return new Promise<() => void>((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        resolve(this.start(session, own));
      };
      const timer = setTimeout(() => {
        const at = own.waiting.indexOf(turn);
        if (at >= 0) own.waiting.splice(at, 1);
        if (own.waiting.length === 0) this.unready(session);
        this.forgetIfIdle(session, own);
        // Held back by its own share, or by the server being full: the message says which.
        const whose =
          own.running >= perSession && perSession < slots
            ? `this session's ${perSession} calls in flight (UPSTREAM_MAX_CALLS_PER_SESSION)`
            : `the ${slots} calls in flight`;
        reject(
          new UpstreamError(
            `${label}: ${name} waited ${timeoutMs} ms for one of ${whose} to finish and was not sent`,
          ),
        );
      }, timeoutMs);
      if (own.waiting.length === 0) this.ready.push(session);
      own.waiting.push(turn);
    });
  }

  private start(session: string, own: Session): () => void {
    this.inFlight++;
    own.running++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.inFlight--;
      own.running--;
      this.forgetIfIdle(session, own);
      this.pump();
    };
  }

  /** Gives free places to waiting sessions under their share, the one with the fewest in flight first. */
  private pump(): void {
    while (this.inFlight < this.opts.slots) {
      let pick = -1;
      let fewest = this.opts.perSession;
      for (const [at, id] of this.ready.entries()) {
        const running = this.sessions.get(id)?.running ?? 0;
        if (running < fewest) {
          pick = at;
          fewest = running;
        }
      }
      if (pick < 0) return;
      const [id] = this.ready.splice(pick, 1) as [string];
      const own = this.sessions.get(id) as Session;
      const next = own.waiting.shift() as () => void;
      // Served: to the back of the line among equals, if it has more waiting.
      if (own.waiting.length > 0) this.ready.push(id);
      next();
    }
  }

  private unready(session: string): void {
    const at = this.ready.indexOf(session);
    if (at >= 0) this.ready.splice(at, 1);
  }

  private forgetIfIdle(session: string, own: Session): void {
    if (own.running === 0 && own.waiting.length === 0 && this.sessions.get(session) === own) {
      this.sessions.delete(session);
    }
  }
}

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
  /** When a call of it last started (a tick of this scheduler; 0: none yet): among equals, the longest ago goes first. */
  lastStart: number;
  /** Its waiting calls, oldest first; each starts the call when called. */
  waiting: (() => void)[];
}

/** A backend's places for calls in flight, shared fairly between sessions. */
export class FairSlots {
  private readonly sessions = new Map<string, Session>();
  /** Sessions with a call waiting. */
  private readonly ready = new Set<string>();
  private inFlight = 0;
  private tick = 0;
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
    const own = this.sessions.get(session) ?? { running: 0, lastStart: 0, waiting: [] };
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
    if (own.waiting.length === 0 && this.ready.size >= QUEUE_FACTOR * slots) {
      this.forgetIfIdle(session, own);
      throw new UpstreamError(
        `${label} is busy: calls of ${this.ready.size} other sessions are waiting for it, the most that may ` +
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
        if (own.waiting.length === 0) this.ready.delete(session);
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
      this.ready.add(session);
      own.waiting.push(turn);
    });
  }

  private start(session: string, own: Session): () => void {
    this.inFlight++;
    own.running++;
    own.lastStart = ++this.tick;
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

  /**
   * Gives free places to waiting sessions under their share: the one with the fewest in flight first, and among
   * equals the one whose last call started longest ago (so sessions take turns, whatever order they queued in).
   */
  private pump(): void {
    while (this.inFlight < this.opts.slots) {
      let pick: string | undefined;
      let best: Session | undefined;
      for (const id of this.ready) {
        const s = this.sessions.get(id) as Session;
        if (s.running >= this.opts.perSession) continue;
        if (
          !best ||
          s.running < best.running ||
          (s.running === best.running && s.lastStart < best.lastStart)
        ) {
          pick = id;
          best = s;
        }
      }
      if (pick === undefined || !best) return;
      const next = best.waiting.shift() as () => void;
      if (best.waiting.length === 0) this.ready.delete(pick);
      next();
    }
  }

  private forgetIfIdle(session: string, own: Session): void {
    if (own.running === 0 && own.waiting.length === 0 && this.sessions.get(session) === own) {
      this.sessions.delete(session);
    }
  }
}

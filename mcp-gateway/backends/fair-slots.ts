import { UpstreamError } from './upstream-types.ts';

// Who gets a shared backend's calls in flight when several sessions want them. One FIFO queue per server let
// one session's 80 parallel slow calls fill every place in flight and the whole queue, so every other
// session's call was refused at once. Here each session has its own bounded queue, holds at most its share of
// the places in flight, and a place that frees goes first to the caller (the credential the request came
// with) with the fewest calls in flight, then within it to its session with the fewest: a session that floods
// only ever waits behind itself, and a client that makes many sessions (an MCP client mints a handle per
// ACTIVATE) only ever waits behind its own — fairness is by what a caller cannot make for free. Memory stays
// bounded: each session's queue, how many sessions of one caller and how many callers may queue at once.

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

/** One caller's sessions on the backend. */
interface Owner {
  running: number;
  lastStart: number;
  sessions: Map<string, Session>;
  /** Its sessions with a call waiting. */
  ready: Set<string>;
}

/** A backend's places for calls in flight, shared fairly between callers, and between each caller's sessions. */
export class FairSlots {
  private readonly owners = new Map<string, Owner>();
  /** Callers with a call waiting. */
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
    for (const o of this.owners.values()) for (const s of o.sessions.values()) n += s.waiting.length;
    return n;
  }

  /**
   * Takes a place for one call of `session` (of caller `owner`, the credential's digest), waiting (within
   * `timeoutMs`) while the backend or the session has its fill; returns the function that gives it back.
   * Refuses at once, with an UpstreamError saying the call did not run, when the session's own queue is full,
   * or too many of the caller's sessions, or too many callers, are queued already.
   */
  async acquire(session: string, name: string, timeoutMs: number, owner = ''): Promise<() => void> {
    const { label, slots, perSession } = this.opts;
    const group = this.owners.get(owner) ?? {
      running: 0,
      lastStart: 0,
      sessions: new Map(),
      ready: new Set(),
    };
    this.owners.set(owner, group);
    const own = group.sessions.get(session) ?? { running: 0, lastStart: 0, waiting: [] };
    group.sessions.set(session, own);
    // A place is free only while every session still waiting holds its whole share: none is passed over.
    if (this.inFlight < slots && own.running < perSession) return this.start(owner, group, session, own);
    if (own.waiting.length >= QUEUE_FACTOR * perSession) {
      throw new UpstreamError(
        `${label}: this session already has ${own.running} calls in flight and ${own.waiting.length} waiting ` +
          `on it, its limit (UPSTREAM_MAX_CALLS_PER_SESSION=${perSession} in flight, ${QUEUE_FACTOR} times as ` +
          `many waiting); ${name} was not sent and did not run — try again when one of them finishes`,
      );
    }
    const limit = QUEUE_FACTOR * slots;
    if (
      own.waiting.length === 0 &&
      (group.ready.size >= limit || (group.ready.size === 0 && this.ready.size >= limit))
    ) {
      const others =
        group.ready.size >= limit ? `${group.ready.size} other sessions` : `${this.ready.size} other callers`;
      this.forgetIfIdle(owner, group, session, own);
      throw new UpstreamError(
        `${label} is busy: calls of ${others} are waiting for it, the most that may ` +
          `(${QUEUE_FACTOR} times UPSTREAM_MAX_CONCURRENT_CALLS=${slots}); ${name} was not sent and did not run — ` +
          'try again shortly',
      );
    }
    return new Promise<() => void>((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        resolve(this.start(owner, group, session, own));
      };
      const timer = setTimeout(() => {
        const at = own.waiting.indexOf(turn);
        if (at >= 0) own.waiting.splice(at, 1);
        if (own.waiting.length === 0) group.ready.delete(session);
        if (group.ready.size === 0) this.ready.delete(owner);
        this.forgetIfIdle(owner, group, session, own);
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
      group.ready.add(session);
      this.ready.add(owner);
      own.waiting.push(turn);
    });
  }

  private start(owner: string, group: Owner, session: string, own: Session): () => void {
    this.inFlight++;
    group.running++;
    own.running++;
    own.lastStart = group.lastStart = ++this.tick;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.inFlight--;
      group.running--;
      own.running--;
      this.forgetIfIdle(owner, group, session, own);
      this.pump();
    };
  }

  /**
   * Gives free places to waiting sessions under their share: the caller with the fewest in flight first, then
   * its session with the fewest; among equals the one whose last call started longest ago (so callers and
   * sessions take turns, whatever order they queued in).
   */
  private pump(): void {
    while (this.inFlight < this.opts.slots) {
      let pick: { owner: string; group: Owner; session: string; own: Session } | undefined;
      for (const owner of this.ready) {
        const group = this.owners.get(owner) as Owner;
        if (pick && !fewer(group, pick.group)) continue;
        const session = this.nextOf(group);
        if (session) pick = { owner, group, ...session };
      }
      if (!pick) return;
      const next = pick.own.waiting.shift() as () => void;
      if (pick.own.waiting.length === 0) pick.group.ready.delete(pick.session);
      if (pick.group.ready.size === 0) this.ready.delete(pick.owner);
      next();
    }
  }

  /** The caller's waiting session under its share that goes next, if any. */
  private nextOf(group: Owner): { session: string; own: Session } | undefined {
    let best: { session: string; own: Session } | undefined;
    for (const session of group.ready) {
      const own = group.sessions.get(session) as Session;
      if (own.running >= this.opts.perSession) continue;
      if (!best || fewer(own, best.own)) best = { session, own };
    }
    return best;
  }

  private forgetIfIdle(owner: string, group: Owner, session: string, own: Session): void {
    if (own.running === 0 && own.waiting.length === 0 && group.sessions.get(session) === own) {
      group.sessions.delete(session);
    }
    if (group.running === 0 && group.sessions.size === 0 && this.owners.get(owner) === group) {
      this.owners.delete(owner);
    }
  }
}

/** Whether `a` goes before `b`: fewer calls in flight, or as many and its last one started longer ago. */
function fewer(
  a: { running: number; lastStart: number },
  b: { running: number; lastStart: number },
): boolean {
  return a.running < b.running || (a.running === b.running && a.lastStart < b.lastStart);
}

// The waiting line of a pool every session shares (the database's query processes, the HTML conversion
// workers). In arrival order, one session's burst of jobs held every other session's job behind all of it,
// often past its deadline. Here the next job is the oldest of the session with the fewest jobs running, and
// among equals of the one whose last job started longest ago: sessions take turns, whatever order they came in.
// How many may wait stays the pool's own business (each job has a deadline; the service caps connections).

interface Share {
  running: number;
  /** When a job of the session last started (a tick of this queue; 0: never). */
  lastStart: number;
}

const NEVER: Share = { running: 0, lastStart: 0 };

/** Jobs waiting for a shared pool, handed out session by session; `session` '' is one shared key. */
export class FairQueue<T extends { session: string }> {
  private readonly items: T[] = [];
  /** Sessions with a job running, or one that ran and more waiting. */
  private readonly shares = new Map<string, Share>();
  private tick = 0;

  get length(): number {
    return this.items.length;
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** Takes out the waiting jobs `expired` picks (past their deadline), oldest first. */
  drop(expired: (item: T) => boolean): T[] {
    const gone = this.items.filter(expired);
    for (const item of gone) this.items.splice(this.items.indexOf(item), 1);
    for (const item of gone) this.forgetIdle(item.session);
    return gone;
  }

  /** The next job to start, counted as running until done() is called with it. */
  take(): T | undefined {
    let pick = -1;
    let best: Share | undefined;
    for (const [at, item] of this.items.entries()) {
      const s = this.shares.get(item.session) ?? NEVER;
      if (!best || s.running < best.running || (s.running === best.running && s.lastStart < best.lastStart)) {
        pick = at;
        best = s;
      }
    }
    if (pick < 0) return undefined;
    const [item] = this.items.splice(pick, 1) as [T];
    const share = this.shares.get(item.session) ?? { running: 0, lastStart: 0 };
    share.running++;
    share.lastStart = ++this.tick;
    this.shares.set(item.session, share);
    return item;
  }

  /** A job that take() gave out has ended. */
  done(item: T): void {
    const share = this.shares.get(item.session);
    if (share) share.running = Math.max(0, share.running - 1);
    this.forgetIdle(item.session);
  }

  /** Empties the queue (shutting down); returns the jobs that were waiting. */
  clear(): T[] {
    this.shares.clear();
    return this.items.splice(0);
  }

  private forgetIdle(session: string): void {
    const share = this.shares.get(session);
    if (share && share.running === 0 && !this.items.some((i) => i.session === session)) {
      this.shares.delete(session);
    }
  }
}

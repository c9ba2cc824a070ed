import { readlink } from 'node:fs/promises';
import type { VerifiedDir } from '../../guards/paths/fd-path.ts';
import type { PathGuard } from '../../guards/paths/guard.ts';
import { ToolError } from '../../kit/errors.ts';

// Making git act on the directories that were checked (Linux, /proc). The path guard checks a real path, but
// git takes paths as text and looks them up again, so a process that swaps a directory on the way for a
// symlink to an outside directory could point git elsewhere after the check. Two measures close that:
//
// 1. Pinning. Each checked directory is opened from its root down without following symlinks (tool-server/guards/paths/fd-path.ts)
//    and handed to git as an extra descriptor (3, 4, …); git is told `/proc/self/fd/N` (cwd, --git-dir,
//    GIT_COMMON_DIR), which the kernel resolves to the open directory itself, never to a name. git keeps such
//    a --git-dir as given (objects, refs, the index and config are all read through it), and a child's cwd is
//    entered through the descriptor before git starts.
// 2. Watching. git 2.39 still turns a work tree into a path of names (it realpath()s --work-tree, then
//    chdir()s there for status and diff) and reads object alternates by name. For those runs the directories
//    above the directory concerned, from its root down, are held open and their change times read before and
//    after: renaming, creating or removing any entry in a directory moves its change time, so a run during
//    which any of them changed is discarded ("changed while git was reading it") and retried once. Change
//    times tick with a coarse clock, so a directory that changed within SETTLE_MS is waited for first.

/** Directories that changed more recently than this are waited for (the coarse clock behind ctime ticks). */
export const SETTLE_MS = 50;

/** Times a run is tried when a watched directory changed during it. */
const ATTEMPTS = 2;

/** The path under which a git child sees the descriptor in `slot` (handed as descriptor 3 + slot). */
export function slotPath(slot: number): string {
  return `/proc/self/fd/${3 + slot}`;
}

/** The refusal for a run whose directories changed under it; nothing git said is passed on. */
export function changedWhileReading(shown: string): ToolError {
  return new ToolError(
    `${shown} changed while git was reading it (a directory on its path was moved, renamed or replaced); ` +
      'nothing was returned, try again',
  );
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A checked directory held open, with the directories above it from its root. */
interface Held {
  real: string;
  chain: VerifiedDir[];
}

/** Open directories for git runs: the descriptors to hand the child, and the watch over their paths. */
export class GitPins {
  private readonly held: Held[];
  /** Shown in refusals: the repository as the caller gave it. */
  private readonly shown: string;

  private constructor(held: Held[], shown: string) {
    this.held = held;
    this.shown = shown;
  }

  /** Opens each of `reals` (real paths the guard has checked) with its chain; `reals[i]` is slotPath(i). */
  static async open(guard: PathGuard, reals: readonly string[], shown: string): Promise<GitPins> {
    const pins = new GitPins([], shown);
    try {
      for (const real of reals) await pins.add(guard, real);
    } catch (err) {
      await pins.close();
      throw err;
    }
    return pins;
  }

  /** Holds one more checked directory (the caller closes the pins on failure); returns its slot. */
  async add(guard: PathGuard, real: string): Promise<number> {
    let chain: VerifiedDir[];
    try {
      chain = await guard.openChain(real);
    } catch (err) {
      if (err instanceof ToolError) throw err;
      throw changedWhileReading(this.shown); // an entry on the way vanished or is no longer a directory
    }
    this.held.push({ real, chain });
    if (chain[chain.length - 1].descriptor === null) {
      throw new Error('GitPins needs the path guard in its race-free mode (/proc/self/fd)');
    }
    return this.held.length - 1;
  }

  /** Where this process reaches the directory in `slot` (its own /proc/self/fd/N). */
  selfPath(slot: number): string {
    return this.held[slot].chain[this.held[slot].chain.length - 1].self;
  }

  /** The descriptors, in slot order. */
  get fds(): number[] {
    return this.held.map((h) => h.chain[h.chain.length - 1].descriptor as number);
  }

  /** The directories above the one in `slot` (and, with `inclusive`, itself): what a run watches. */
  above(slot: number, inclusive = false): VerifiedDir[] {
    const { chain } = this.held[slot];
    return inclusive ? chain : chain.slice(0, -1);
  }

  /**
   * Runs `fn` (one git run) while `watched` stay as they were: waits for recently changed ones to settle,
   * confirms every held directory is still at its checked path, runs, and discards the outcome (success or
   * failure alike) when any watched directory changed meanwhile. Without watched directories it just runs.
   */
  async run<T>(watched: readonly VerifiedDir[], fn: () => Promise<T>): Promise<T> {
    if (watched.length === 0) return fn();
    for (let attempt = 1; ; attempt++) {
      const before = await this.settled(watched);
      await this.assertInPlace();
      const outcome = await fn().then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      );
      const after = await Promise.all(watched.map((d) => d.changeTime()));
      if (after.every((t, i) => t === before[i])) {
        if (outcome.ok) return outcome.value;
        throw outcome.error;
      }
      if (attempt >= ATTEMPTS) throw changedWhileReading(this.shown);
    }
  }

  /** Lets every descriptor go. */
  async close(): Promise<void> {
    await Promise.all(this.held.flatMap((h) => h.chain.map((d) => d.close())));
  }

  /** The change times of `watched`, once none of them changed within SETTLE_MS (waiting once for that). */
  private async settled(watched: readonly VerifiedDir[]): Promise<bigint[]> {
    for (let look = 0; look < 2; look++) {
      const times = await Promise.all(watched.map((d) => d.changeTime()));
      const now = Date.now();
      const ages = times.map((t) => now - Number(t / 1_000_000n));
      // A negative age is a clock from elsewhere (a network file system): no coarse tick to wait out.
      const youngest = Math.min(...ages.filter((age) => age >= 0), Number.POSITIVE_INFINITY);
      if (youngest >= SETTLE_MS) return times;
      if (look === 0) await sleep(SETTLE_MS - youngest + 1);
    }
    throw changedWhileReading(this.shown);
  }

  /** Each held directory's descriptor still reads back as its checked path, so its name leads to it now. */
  private async assertInPlace(): Promise<void> {
    for (const { real, chain } of this.held) {
      const now = await readlink(`/proc/self/fd/${chain[chain.length - 1].descriptor}`).catch(() => null);
      if (now !== real) throw changedWhileReading(this.shown);
    }
  }
}

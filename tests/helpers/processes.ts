import { readdirSync, readFileSync } from 'node:fs';

// Process checks for the upstream-server tests, from /proc (Linux): whether a pid still runs, and the
// children of a process.

/** The state letter and parent pid of a process, or undefined when it is gone. */
function stat(pid: number): { state: string; ppid: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may contain spaces: read the fields after the last ')'.
    const [state, ppid] = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state, ppid: Number(ppid) };
  } catch {
    return undefined;
  }
}

/** True while the process exists and is not a zombie waiting to be reaped. */
export function isAlive(pid: number): boolean {
  const s = stat(pid);
  return s !== undefined && s.state !== 'Z' && s.state !== 'X';
}

/** The pids whose parent is `ppid`. */
export function childPids(ppid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => stat(pid)?.ppid === ppid && isAlive(pid));
}

/** Waits for `check` to hold, polling; fails naming `what` if it does not within `limitMs` (a bound, not a timing assertion). */
export async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  limitMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

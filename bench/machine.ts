import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

// The machine a benchmark ran on, for the report: CPU, cores, memory, OS, Node, and the date.

/** What the report says about where it ran. */
export interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  date: string;
  commit: string;
  /** The 1-minute load average when the run started (other work on a shared machine shows here). */
  loadAtStart: number;
}

/** Describes this machine now. */
export function describeMachine(): Machine {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    // Not a git checkout.
  }
  let osName = `${os.type()} ${os.release()}`;
  try {
    const pretty = /PRETTY_NAME="([^"]+)"/.exec(readFileSync('/etc/os-release', 'utf8'))?.[1];
    if (pretty) osName = `${pretty} (${os.type()} ${os.release()})`;
  } catch {
    // No os-release.
  }
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: osName,
    node: process.version,
    date: new Date().toISOString(),
    commit,
    loadAtStart: os.loadavg()[0],
  };
}

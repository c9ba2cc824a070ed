/**
 * A readers-writer lock for the file tools (PathGuard.runFileTool). Writers run one at a time, so two edits of
 * one file never lose one of them. Where descriptors cannot be verified (no /proc), readers take it too: a
 * move running between a check and its use could otherwise swap a checked directory for an outward symlink.
 */
export class RwLock {
  private readers = 0;
  private writing = false;
  private readonly queue: { write: boolean; start: () => void }[] = [];

  read<T>(fn: () => Promise<T>): Promise<T> {
    return this.run(false, fn);
  }

  write<T>(fn: () => Promise<T>): Promise<T> {
    return this.run(true, fn);
  }

  private async run<T>(write: boolean, fn: () => Promise<T>): Promise<T> {
    await new Promise<void>((start) => {
      this.queue.push({ write, start });
      this.pump();
    });
    try {
      return await fn();
    } finally {
      if (write) this.writing = false;
      else this.readers--;
      this.pump();
    }
  }

  /** Starts waiters in arrival order: any number of readers together, or one writer alone. */
  private pump(): void {
    while (this.queue.length > 0 && !this.writing) {
      const next = this.queue[0];
      if (next.write && this.readers > 0) return;
      this.queue.shift();
      if (next.write) this.writing = true;
      else this.readers++;
      next.start();
      if (next.write) return;
    }
  }
}

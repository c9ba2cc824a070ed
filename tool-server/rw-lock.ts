/**
 * A readers-writer lock for tool calls. The path guard checks a path and the tool then uses it; a move
 * running in between could swap a checked directory for a symlink that leads outside the roots. So
 * read-only tools run side by side, and a tool that changes the filesystem runs alone.
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

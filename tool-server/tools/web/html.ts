import { Worker } from 'node:worker_threads';
import { siblingModule } from '../../../lib/config/installation.ts';
import { ToolError } from '../../kit/errors.ts';
import { FairQueue } from '../../kit/fair-queue.ts';
import { htmlToMarkdown } from './content.ts';
import type { ConvertReply } from './html-worker.ts';

// Where fetch_url turns HTML into markdown. The tool-server uses a small pool of worker threads, so a large
// page neither blocks other calls nor outlives its deadline (a worker past it is terminated); a context built
// by hand (tests of other tools) converts on the calling thread.

/** Converts one page within a time budget. */
export interface HtmlConverter {
  /** `session`: whose call it is; waiting pages are converted session by session (kit/fair-queue.ts). */
  toMarkdown(
    html: string,
    url: string,
    timeoutMs: number,
    session?: string,
  ): Promise<{ title: string | null; markdown: string }>;
  /** Stops the workers (tests; the tool-server's workers are unref'd and end with the process). */
  close(): Promise<void>;
}

/** Converts on the calling thread; no time limit can interrupt it. */
export const inlineConverter: HtmlConverter = {
  toMarkdown: async (html, url) => htmlToMarkdown(html, url),
  close: async () => {},
};

interface Job {
  session: string;
  html: string;
  url: string;
  timeoutMs: number;
  /** When the job must be done by, counted from when it was asked for (waiting in the queue included). */
  deadline: number;
  resolve: (v: { title: string | null; markdown: string }) => void;
  reject: (e: Error) => void;
}

function tooSlow(job: Job): ToolError {
  return new ToolError(
    `Converting the page to markdown took longer than ${job.timeoutMs} ms and was stopped; ` +
      'call fetch_url again with raw: true for the HTML source',
  );
}

/** A pool of at most `size` conversion workers, started on first use; a worker past its deadline is terminated. */
export function createHtmlConverter(size = 2): HtmlConverter {
  const idle: Worker[] = [];
  const queue = new FairQueue<Job>();
  let running = 0;
  let nextId = 1;

  function dispatch(): void {
    const now = Date.now();
    for (const job of queue.drop((j) => now >= j.deadline)) job.reject(tooSlow(job));
    while (queue.length > 0 && (idle.length > 0 || running < size)) {
      const job = queue.take() as Job;
      const worker = idle.pop() ?? startWorker();
      running += 1;
      run(worker, job);
    }
  }

  function startWorker(): Worker {
    const worker = new Worker(siblingModule(import.meta.url, './html-worker.ts'), {
      resourceLimits: { maxOldGenerationSizeMb: 1024 },
    });
    worker.unref();
    return worker;
  }

  function run(worker: Worker, job: Job): void {
    const id = nextId++;
    const finish = (settle: () => void, keep: boolean) => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
      running -= 1;
      queue.done(job);
      if (keep) idle.push(worker);
      else void worker.terminate();
      settle();
      dispatch();
    };
    const failed = (why: string) => new ToolError(`Converting the page to markdown failed: ${why}`);
    const onMessage = (reply: ConvertReply) => {
      if (reply.id !== id) return;
      if (reply.ok) finish(() => job.resolve({ title: reply.title, markdown: reply.markdown }), true);
      else finish(() => job.reject(failed(reply.error)), true);
    };
    const onError = (err: Error) => finish(() => job.reject(failed(err.message)), false);
    const onExit = (code: number) =>
      finish(() => job.reject(failed(`the worker exited (code ${code})`)), false);
    const timer = setTimeout(() => finish(() => job.reject(tooSlow(job)), false), job.deadline - Date.now());
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
    worker.postMessage({ id, html: job.html, url: job.url });
  }

  return {
    toMarkdown(html, url, timeoutMs, session = '') {
      return new Promise((resolve, reject) => {
        const job: Job = { session, html, url, timeoutMs, deadline: Date.now() + timeoutMs, resolve, reject };
        queue.push(job);
        dispatch();
      });
    },
    async close() {
      await Promise.all(idle.splice(0).map((w) => w.terminate()));
    },
  };
}

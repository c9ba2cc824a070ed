import { Worker } from 'node:worker_threads';
import { type DbJob, runJob } from './ops.ts';

// The entry of a query process (forked by runner.ts). It answers one job per message,
// each on a fresh read-only connection. It is a process, not a worker thread: a statement running inside
// sqlite3_step() never returns to JavaScript, so Worker.terminate() cannot stop it (the thread keeps running,
// and even process.exit() waits for it); SIGKILL can.

if (typeof process.send !== 'function') {
  console.error('worker.ts is started by the tool-server (runner.ts) with an IPC channel');
  process.exit(2);
}

process.on('message', (job: DbJob) => {
  process.send?.(runJob(job));
});

// The tool-server went away (or closed its pool): nothing more will come.
process.on('disconnect', () => process.exit(0));

// 'disconnect' is not seen while a statement runs on this thread, so a thread of its own watches for the
// tool-server dying mid-query (killed, crashed) and ends this process, which would otherwise run on, orphaned.
// The parent's pid is read here, not in the thread: a thread that starts late (a loaded machine) after the
// tool-server has already died would read its new parent and never notice.
new Worker(
  `const parent = ${process.ppid};
   setInterval(() => { if (process.ppid !== parent) process.kill(process.pid, 'SIGKILL'); }, 500);`,
  { eval: true },
).unref();

process.send({ ready: true });

import { parentPort } from 'node:worker_threads';
import { htmlToMarkdown } from './content.ts';

// The body of the HTML conversion worker (started by html.ts): Readability and turndown are synchronous
// and take seconds on a large page, so they run here, off the tool-server's event loop.

/** One conversion request, and its answer. */
export interface ConvertRequest {
  id: number;
  html: string;
  url: string;
}

/** The worker's answer to one request: the converted page or the error's message. */
export type ConvertReply =
  | { id: number; ok: true; title: string | null; markdown: string }
  | { id: number; ok: false; error: string };

parentPort?.on('message', (req: ConvertRequest) => {
  let reply: ConvertReply;
  try {
    reply = { id: req.id, ok: true, ...htmlToMarkdown(req.html, req.url) };
  } catch (err) {
    reply = { id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort?.postMessage(reply);
});

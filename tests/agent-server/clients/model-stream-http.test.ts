import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { openAIModel } from '../../../agent-server/clients/model.ts';
import { leanFetch } from '../../../lib/http/lean-fetch.ts';
import { chunk } from '../../helpers/msw.ts';

// The streaming client against a real HTTP server through the lean fetch, as the agent-server runs it (no msw:
// its pass-through does not hand a cancelled body's end back to the connection).

const request = { model: 'test-model', messages: [{ role: 'user' as const, content: 'hi' }], tools: [] };

describe('the model client, streaming over HTTP', () => {
  it('hands the text on as it comes through the lean fetch, and abandons a stall there too', async () => {
    let sent: () => void = () => {};
    const firstSent = new Promise<void>((r) => {
      sent = r;
    });
    const endpoint = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify(chunk({ content: 'Hel' }))}\n\n`);
      sent();
      // Then nothing: a stall.
    });
    await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', () => r()));
    try {
      const m = openAIModel({
        baseURL: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/v1`,
        timeoutMs: 5000,
        maxAttempts: 1,
        stream: true,
        stallMs: 100,
        fetch: leanFetch,
      });
      const deltas: string[] = [];
      const call = m.complete(request, { onDelta: (t) => deltas.push(t) }).catch((err: Error) => err);
      await firstSent;
      await expect.poll(() => deltas).toEqual(['Hel']);
      expect(((await call) as Error).message).toMatch(
        /sent nothing for 100 ms mid-reply \(AGENT_MODEL_STALL_MS\)$/,
      );
    } finally {
      endpoint.closeAllConnections();
      await new Promise<void>((r) => endpoint.close(() => r()));
    }
  });

  it('lets go of an endless stream once its reply is past the cap (the connection is closed)', async () => {
    let closed = false;
    const endpoint = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const piece = `data: ${JSON.stringify(chunk({ content: 'word ' }))}\n\n`;
      const more = () => {
        while (!closed && res.write(piece));
      };
      res.on('drain', more);
      res.on('close', () => {
        closed = true;
      });
      more();
    });
    await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', () => r()));
    try {
      const m = openAIModel({
        baseURL: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/v1`,
        timeoutMs: 5000,
        maxAttempts: 1,
        stream: true,
        maxReplyChars: 100,
        fetch: leanFetch,
      });
      const err = (await m.complete(request).catch((e: Error) => e)) as Error;
      expect(err.message).toContain('ran past 100 characters');
      await expect.poll(() => closed).toBe(true);
    } finally {
      endpoint.closeAllConnections();
      await new Promise<void>((r) => endpoint.close(() => r()));
    }
  });
});

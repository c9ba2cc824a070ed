import { Webhook } from 'standardwebhooks';
import { type Dispatcher, request } from 'undici';
import { createGuardedDispatcher } from '../../lib/net/guarded-agent.ts';
import type { Logger } from '../../lib/telemetry/log.ts';
import type { DueWebhook, TaskStore } from '../store/interface.ts';
import type { WebhookGuard } from './guard.ts';

// The deliverer: in every process that runs tasks, it claims the webhook POSTs that are due (store/webhooks.ts,
// one worker each), signs each as Standard Webhooks says (`webhook-id`, `webhook-timestamp`,
// `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`), POSTs it through the address guard
// with a deadline, and records what came of it: a 2xx is delivered; anything else is retried with exponential
// backoff and jitter until AGENT_WEBHOOK_MAX_AGE_S after it was recorded, then given up as `failed`. It looks
// when this process records a POST, and on a timer (retries that come due, another process's rows, a restart).

export interface DelivererOptions {
  store: TaskStore;
  /** The Standard Webhooks secret (`whsec_…`): never logged. */
  secret: string;
  guard: WebhookGuard;
  /** One POST's deadline: connect, the answer and its (bounded) body. */
  timeoutMs: number;
  /** How long after it was recorded a POST is retried before it is given up. */
  maxAgeMs: number;
  log: Logger;
  /** How often the store is read for due POSTs besides this process's own (default 1 s). */
  pollMs?: number;
  /** The first retry's delay; each next one doubles, up to `maxRetryMs` (defaults 5 s and 1 h). */
  firstRetryMs?: number;
  maxRetryMs?: number;
  /** [0, 1): the jitter's draw (Math.random unless a test fixes it). */
  random?: () => number;
  now?: () => number;
}

/** POSTs claimed at once by one deliverer. */
const BATCH = 8;
/** What of a receiver's answer is read (the rest is dropped): enough for last_error. */
const MAX_ANSWER_BYTES = 4096;
/** What of it last_error keeps. */
const MAX_ERROR_CHARS = 300;

export interface Deliverer {
  stop(): Promise<void>;
}

export function startDeliverer(opts: DelivererOptions): Deliverer {
  const { store, log } = opts;
  const signer = new Webhook(opts.secret);
  const dispatcher = createGuardedDispatcher({ ...opts.guard, connectTimeoutMs: opts.timeoutMs });
  const stopping = new AbortController();
  let round: Promise<void> | undefined;
  let again = false;
  const tick = () => {
    if (stopping.signal.aborted) return;
    if (round) {
      again = true;
      return;
    }
    round = sendDue(opts, signer, dispatcher, stopping.signal)
      .catch((err: unknown) => log.warn({ err }, 'webhook deliveries could not be read or recorded'))
      .finally(() => {
        round = undefined;
        if (again) {
          again = false;
          tick();
        }
      });
  };
  const timer = setInterval(tick, opts.pollMs ?? 1000);
  timer.unref();
  const unlisten = store.onWebhookDue(tick);
  tick();
  return {
    async stop() {
      stopping.abort();
      clearInterval(timer);
      unlisten();
      await round;
      await dispatcher.destroy().catch(() => undefined);
    },
  };
}

/** Claims and sends due POSTs until none is left (a POST cut short by the stop is sent again after its claim lapses). */
async function sendDue(
  opts: DelivererOptions,
  signer: Webhook,
  dispatcher: Dispatcher,
  stop: AbortSignal,
): Promise<void> {
  // Claimed for twice a POST's deadline and a second: past it (its worker stopped), another may send it again.
  const leaseMs = 2 * opts.timeoutMs + 1000;
  while (!stop.aborted) {
    const due = await opts.store.claimWebhooks(BATCH, leaseMs);
    await Promise.all(
      due.map(async (d) => {
        const error = await post(d, opts, signer, dispatcher, stop);
        if (stop.aborted) return;
        const next = error === undefined ? undefined : retryAt(d, opts);
        // Its URL is not logged: a receiver's token often rides in it.
        if (error !== undefined && next === undefined)
          opts.log.warn(
            { webhook: d.id, task: d.task_id, attempts: d.attempts, error },
            'webhook POST given up',
          );
        // Not recorded (the database failing): the claim lapses and the POST is sent again, same id.
        const recorded =
          error === undefined
            ? opts.store.webhookDelivered(d.id)
            : opts.store.webhookRetry(d.id, error, next);
        await recorded.catch((err: unknown) =>
          opts.log.warn({ err, webhook: d.id, task: d.task_id }, 'a webhook POST could not be recorded'),
        );
      }),
    );
    if (due.length < BATCH) return;
  }
}

/** The POST, signed; undefined when a 2xx took it, else what went wrong. */
async function post(
  d: DueWebhook,
  opts: DelivererOptions,
  signer: Webhook,
  dispatcher: Dispatcher,
  stop: AbortSignal,
): Promise<string | undefined> {
  const sent = new Date((opts.now ?? Date.now)());
  try {
    const res = await request(d.url, {
      method: 'POST',
      dispatcher,
      signal: AbortSignal.any([stop, AbortSignal.timeout(opts.timeoutMs)]),
      headers: {
        'content-type': 'application/json',
        'user-agent': 'toolshift-webhooks',
        'webhook-id': d.id,
        'webhook-timestamp': String(Math.floor(sent.getTime() / 1000)),
        'webhook-signature': signer.sign(d.id, sent, d.payload),
      },
      body: d.payload,
    });
    const answer = await readBounded(res.body);
    if (res.statusCode >= 200 && res.statusCode < 300) return undefined;
    const redirect = res.statusCode >= 300 && res.statusCode < 400 ? ' (redirects are not followed)' : '';
    return `HTTP ${res.statusCode}${redirect}${answer ? `: ${answer}` : ''}`.slice(0, MAX_ERROR_CHARS);
  } catch (err) {
    const e = err as Error & { cause?: Error; code?: string };
    const cause = e.cause ?? e;
    if (e.name === 'TimeoutError' || cause.name === 'TimeoutError')
      return `no answer within ${opts.timeoutMs} ms (AGENT_WEBHOOK_TIMEOUT_S)`;
    const code = (cause as { code?: string }).code;
    return `${cause.message}${code && !cause.message.includes(code) ? ` (${code})` : ''}`.slice(
      0,
      MAX_ERROR_CHARS,
    );
  }
}

/** At most MAX_ANSWER_BYTES of a body, as one line of text; the rest is dropped unread. */
async function readBounded(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= MAX_ANSWER_BYTES) break;
    }
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, MAX_ANSWER_BYTES).toString('utf8').replace(/\s+/g, ' ').trim();
}

/**
 * When a failed POST is next tried: the first retry after `firstRetryMs`, each later one twice as late (up to
 * `maxRetryMs`), ±25 % jitter so receivers that come back are not met by every sender at once; undefined once
 * that is past `maxAgeMs` after the POST was recorded (it is given up).
 */
export function retryAt(d: Pick<DueWebhook, 'attempts' | 'created_at'>, opts: DelivererOptions) {
  const now = (opts.now ?? Date.now)();
  const base = Math.min(
    (opts.firstRetryMs ?? 5000) * 2 ** Math.max(0, d.attempts - 1),
    opts.maxRetryMs ?? 3_600_000,
  );
  const at = now + Math.round(base * (0.75 + 0.5 * (opts.random ?? Math.random)()));
  return at > Date.parse(d.created_at) + opts.maxAgeMs ? undefined : at;
}

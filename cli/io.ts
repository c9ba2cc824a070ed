import type { ServiceEndpoint } from '../lib/http/http-client.ts';
import { ServiceError } from '../lib/http/http-client.ts';

// What the CLI reads and writes, its exit codes, and the errors that choose them. Tests pass their own CliIo.

/** Where the CLI writes and what it reaches; the real entry fills it from the process, tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: Record<string, string | undefined>;
  fetch?: (input: string, init?: RequestInit) => Promise<Response>;
  /** All of stdin, for `run -`. */
  readStdin?: () => Promise<string>;
  /** stderr is a terminal: live progress with a spinner (and colour unless NO_COLOR). */
  stderrIsTTY?: boolean;
  /** stdout is a terminal: an answer already shown as it streamed is not printed again. */
  stdoutIsTTY?: boolean;
  /** stdin is a terminal: the Ctrl-C question can be answered by typing. */
  stdinIsTTY?: boolean;
  /** Subscribes to Ctrl-C (SIGINT); returns the unsubscribe function. */
  onInterrupt?: (handler: () => void) => () => void;
  /** The chat's prompt (`toolshift chat`): a line edited on a terminal, or the next line of piped stdin. */
  openPrompt?: () => ChatPrompt;
  /** One line typed on the terminal (the answer to the Ctrl-C question); undefined at end of input. */
  readLine?: (signal: AbortSignal) => Promise<string | undefined>;
  /** The clock and timer for the spinner and elapsed times. */
  now?: () => number;
  setInterval?: (fn: () => void, ms: number) => unknown;
  clearInterval?: (handle: unknown) => void;
  /** How long a non-interactive Ctrl-C waits for a second one before detaching. */
  detachAfterMs?: number;
  /** Waits (`run` waiting for room on a busy agent-server); a real timer by default. */
  sleep?: (ms: number) => Promise<void>;
  /** How long `run` and `tasks watch` wait for an agent-server that went away mid-task (60 s). */
  reconnectForMs?: number;
}

/** Where `toolshift chat` reads its lines. */
export interface ChatPrompt {
  /** The next line, after showing `prompt` on a terminal; undefined at end of input or Ctrl-C on an empty line. */
  next(prompt: string): Promise<string | undefined>;
  /** Stops reading (the chat ended before its input did). */
  close(): void;
}

/** The exit codes, documented in the README and in `toolshift --help`. */
export const EXIT = {
  /** The command did what was asked; for run/watch: the task completed. */
  ok: 0,
  /** The task failed, hit max_steps, timed out or was cancelled; or the server refused the request as invalid. */
  failed: 1,
  /** The command line was wrong (unknown command or flag, missing argument). */
  usage: 2,
  /** A service could not be reached, answered as another service, or refused the credentials (401/403). */
  unreachable: 3,
  /** Interrupted and detached: the task keeps running on the server. */
  detached: 130,
} as const;

/** A wrong command line; exit 2 with a pointer to --help. */
export class UsageError extends Error {
  readonly command?: string;

  constructor(message: string, command?: string) {
    super(message);
    this.command = command;
    this.name = new.target.name;
  }
}

/** A service that could not be reached, or answered as something else; exit 3. */
export class UnreachableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The services the CLI talks to: which variable points at each, and what it answers as. */
export type ServiceName = 'agent-server' | 'mcp-gateway';
const VARIABLE: Record<ServiceName, string> = { 'agent-server': 'AGENT_URL', 'mcp-gateway': 'GATEWAY_URL' };

/**
 * An endpoint for `service` whose fetch turns a failed connection into "cannot reach the <service> at <url>
 * … start it with npm start", and an answer from another service (or something that is not toolshift) into
 * "<url> is the …, not the <service>". `withheld` (the token must not go to `baseUrl`, cli/targets.ts) is
 * thrown by every call before anything is sent. Requests go only to `baseUrl`'s origin, and a redirect is
 * not followed: either would carry the token (in a header, or a console login's body) somewhere else.
 */
export function serviceEndpoint(
  service: ServiceName,
  baseUrl: string,
  token: string | undefined,
  io: CliIo,
  withheld?: Error,
): ServiceEndpoint {
  const doFetch = io.fetch ?? fetch;
  const variable = VARIABLE[service];
  const origin = URL.canParse(baseUrl) ? new URL(baseUrl).origin : undefined;
  return {
    baseUrl,
    headers: token && !withheld ? { authorization: `Bearer ${token}` } : undefined,
    // Tasks and their event streams are long; the CLI waits as long as they run.
    timeoutMs: 24 * 3600 * 1000,
    fetch: async (url, init) => {
      if (withheld) throw withheld;
      if (!origin || !URL.canParse(url) || new URL(url).origin !== origin) {
        throw new UnreachableError(
          `${variable} must be an http(s) URL such as http://127.0.0.1:8000, got "${baseUrl}"`,
        );
      }
      let res: Response;
      try {
        res = await doFetch(url, { ...init, redirect: 'manual' });
      } catch (err) {
        if (init?.signal?.aborted) throw err;
        const why = (err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
        throw new UnreachableError(
          `cannot reach the ${service} at ${baseUrl} (${why}). Is toolshift running? Start it with \`npm start\`, ` +
            `or set ${variable} to where the ${service} listens.`,
        );
      }
      if (res.status >= 300 && res.status < 400) {
        throw new UnreachableError(
          `${baseUrl} answered ${res.status}, a redirect to ${res.headers.get('location') ?? 'nowhere'}: the CLI ` +
            `follows none (its token would go along); set ${variable} to the ${service}'s own address.`,
        );
      }
      const answeredAs = res.headers.get('x-toolshift-service');
      if (
        answeredAs &&
        answeredAs !== service &&
        ['agent-server', 'mcp-gateway', 'tool-server'].includes(answeredAs)
      ) {
        throw new UnreachableError(
          `${baseUrl} is the toolshift ${answeredAs}, not the ${service}: set ${variable} to the ${service}'s address.`,
        );
      }
      if (!answeredAs && !res.ok) {
        const type = res.headers.get('content-type') ?? 'no content type';
        throw new UnreachableError(
          `${baseUrl} answered ${res.status} (${type}) and does not look like the toolshift ${service}: ` +
            `check ${variable}.`,
        );
      }
      return res;
    },
  };
}

/** The error a failed call comes to: its own, or the one our fetch threw underneath lib's ServiceError. */
export function rootCause(err: unknown): unknown {
  if (err instanceof ServiceError && err.cause instanceof UnreachableError) return err.cause;
  return err;
}

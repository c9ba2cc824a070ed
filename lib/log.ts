import { pino } from 'pino';

/** A pino logger. */
export type Logger = pino.Logger;

/** One JSON-lines logger per service, named so the three services' lines can be told apart. */
export function createLogger(service: string, level = 'info'): Logger {
  return pino({ name: service, level });
}

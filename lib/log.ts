import { pino } from 'pino';

/** A pino logger. */
export type Logger = pino.Logger;

/** Where a credential could sit in a logged object; pino replaces it before the line is written. */
const REDACT = ['authorization', '*.authorization', '*.headers.authorization', '*.*.headers.authorization'];

/** One JSON-lines logger per service, named so the three services' lines can be told apart. */
export function createLogger(service: string, level = 'info', destination?: pino.DestinationStream): Logger {
  const options = { name: service, level, redact: { paths: REDACT, censor: '[redacted]' } };
  return destination ? pino(options, destination) : pino(options);
}

// Colour for a terminal, nothing for a pipe: one switch decides, NO_COLOR (https://no-color.org) wins.

/** Wraps text in a style, or returns it unchanged when colour is off. */
export type Paint = (text: string) => string;

/** The styles the CLI uses. */
export interface Style {
  enabled: boolean;
  bold: Paint;
  dim: Paint;
  red: Paint;
  green: Paint;
  yellow: Paint;
  blue: Paint;
  magenta: Paint;
  cyan: Paint;
}

const code =
  (open: number, close: number): Paint =>
  (text) =>
    `\x1b[${open}m${text}\x1b[${close}m`;

/** Styles that colour when `enabled`, and pass text through otherwise. */
export function createStyle(enabled: boolean): Style {
  const p = (open: number, close: number): Paint => (enabled ? code(open, close) : (t) => t);
  return {
    enabled,
    bold: p(1, 22),
    dim: p(2, 22),
    red: p(31, 39),
    green: p(32, 39),
    yellow: p(33, 39),
    blue: p(34, 39),
    magenta: p(35, 39),
    cyan: p(36, 39),
  };
}

/** Whether to colour output going to a stream that `isTTY` or not, given the environment. */
export function colourWanted(isTTY: boolean | undefined, env: Record<string, string | undefined>): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return isTTY === true && env.TERM !== 'dumb';
}

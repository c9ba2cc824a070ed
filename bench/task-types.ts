// What a benchmark task is made of: the replies a model gives, action by action, and for code mode the replies a
// model writing scripts gives where they are not the mechanical translation of the native ones.

/** What a model does in one reply. */
export type Action =
  | { list: string }
  | { activate: string[] }
  | { deactivate: string[] }
  | { tool: string; args: Record<string, unknown> };

/** What a model in code mode does in one reply: toolset actions as in native mode, and scripts (run_code). */
export type CodeAction = Exclude<Action, { tool: string }> | { run: string };

/** A task: its goal, its replies in order (each one or more actions), and its final answer. */
export interface BenchTask {
  key: string;
  goal: string;
  turns: Action[][];
  answer: string;
  /**
   * Code mode's replies, written by hand where a script does in one reply what native mode needs several for
   * (the data-heavy tasks); absent, code mode turns each native reply's tool calls into one script.
   */
  code?: CodeAction[][];
  /** A data-heavy task: its figures are reported apart from the twelve's. */
  dataHeavy?: boolean;
}

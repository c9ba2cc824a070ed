// The tool-server's two errors of a call, in a module that imports nothing: the tools, the path and network
// guards and the registry all throw or catch them, and none of them is below another for it.

/** A tool's failure that the model can act on; its message becomes `ToolResult.error`. */
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Arguments that do not match a tool's schema: a malformed request (HTTP 400), not a tool failure. */
export class ToolInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

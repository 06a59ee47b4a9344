/** Where a command writes, and the exit code it sets when it returns normally. */
export interface Io {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  exitCode: number;
}

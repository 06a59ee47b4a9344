/** Where an error was thrown in a caller's code (Node only: the shared errors module is the browser console's too). */
import path from 'node:path';

/**
 * Where in the caller's code an error was thrown: among the frames of its stack above the first
 * one in `ours` (the folders of the toolkit's own code: the caller's code runs inside ours), the
 * first outside `node_modules`, else the first at all, as `file:line:column` relative to the
 * working folder (only the file for a CommonJS module compiled on the fly). Undefined when there is
 * none: an error thrown by our own code, or a value thrown that is not an Error.
 */
export function thrownAt(err: unknown, ours: readonly string[]): string | undefined {
  const stack = err instanceof Error && typeof err.stack === 'string' ? err.stack : '';
  const shown = (file: string): string => {
    const rel = path.relative(process.cwd(), file);
    return rel.startsWith('..') ? file : rel;
  };
  const frames: { file: string; at: string }[] = [];
  for (const line of stack.split('\n').slice(1)) {
    // A CommonJS module compiled on the fly (tsx) runs from a data: URL naming its file, with no line of it we could trust.
    const compiled = /[?&]filePath=([^:?&)]+)/.exec(line);
    const m = compiled ? undefined : /\(?((?:file:\/\/)?\/[^()]*?):(\d+):(\d+)\)?$/.exec(line.trim());
    const file = compiled ? decodeURIComponent(compiled[1] as string).replace(/\?namespace=.*$/, '') : m ? ((m[1] as string).startsWith('file://') ? decodeURIComponent(new URL(m[1] as string).pathname) : (m[1] as string)) : undefined;
    if (file === undefined) continue;
    if (ours.some((dir) => file.startsWith(dir))) break;
    frames.push({ file, at: m ? `${shown(file)}:${m[2]}:${m[3]}` : shown(file) });
  }
  return (frames.find((f) => !f.file.includes('/node_modules/')) ?? frames[0])?.at;
}

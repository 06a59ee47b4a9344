/**
 * Text files read strictly: invalid UTF-8 is an error naming the file and line, never a silent
 * U+FFFD in a task's instruction or a reward's key (what `readFile(…, 'utf8')` does).
 */
import { readFile } from 'node:fs/promises';
import { AgentError } from './errors.js';

const strict = new TextDecoder('utf-8', { fatal: true });

/** The text of `bytes`, or an `AgentError` (`code`, default `DEFINITION_INVALID`) naming `name`'s first line that is not UTF-8. */
export function decodeUtf8(bytes: Uint8Array, name: string, code: 'DEFINITION_INVALID' | 'BAD_USAGE' = 'DEFINITION_INVALID'): string {
  try {
    return strict.decode(bytes);
  } catch {
    let line = 1;
    let start = 0;
    for (let i = 0; i <= bytes.length; i++) {
      if (i < bytes.length && bytes[i] !== 0x0a) continue;
      try {
        strict.decode(bytes.subarray(start, i));
      } catch {
        break;
      }
      line++;
      start = i + 1;
    }
    throw new AgentError(code, `${name}:${line} is not valid UTF-8`, { hint: 'Save the file as UTF-8 (iconv -f <its encoding> -t UTF-8), or fix the bytes on that line.' });
  }
}

/** Read a file as strict UTF-8 (see `decodeUtf8`); the read's own errors are thrown as they are. */
export async function readUtf8(file: string, name = file, code?: 'DEFINITION_INVALID' | 'BAD_USAGE'): Promise<string> {
  return decodeUtf8(await readFile(file), name, code);
}

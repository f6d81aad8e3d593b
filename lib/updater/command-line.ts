import { ErrorCodes, GateError } from '../errors.js';

/**
 * Splits a command line into its words as a POSIX shell would for the simple cases, and no
 * further: blanks separate words; '...' keeps everything literally; "..." keeps everything but `\"`
 * and `\\`; a backslash outside quotes escapes the next character. Nothing else is special
 * (no `$`, globs, pipes, `;` or redirections): the command is then run without a shell, so a value
 * substituted into it can never become shell syntax. Throws GATE_ERR_INVALID_ARGUMENT for an
 * unterminated quote or an empty line. Pure.
 */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === ' ' || ch === '\t' || ch === '\n') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
      continue;
    }
    inWord = true;
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `unterminated ' in command ${JSON.stringify(line)}`);
      word += line.slice(i + 1, end);
      i = end;
    } else if (ch === '"') {
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\' && (line[j + 1] === '"' || line[j + 1] === '\\')) j++;
        word += line[j];
      }
      if (j >= line.length) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `unterminated " in command ${JSON.stringify(line)}`);
      i = j;
    } else if (ch === '\\' && i + 1 < line.length) {
      word += line[++i];
    } else {
      word += ch;
    }
  }
  if (inWord) words.push(word);
  if (words.length === 0) throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'empty command');
  return words;
}

/** The words of `line` with every `{version}` replaced, after splitting: a version is never re-split. */
export function commandWithVersion(line: string, version: string): string[] {
  return splitCommandLine(line).map((word) => word.replaceAll('{version}', version));
}

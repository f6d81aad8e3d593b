import { pino, type Logger } from 'pino';

export interface LogLine {
  level: number;
  msg: string;
  component?: string;
  code?: string;
  remote?: string;
  [key: string]: unknown;
}

/** A pino logger that keeps every line as parsed JSON, for asserting on what gets logged. */
export function captureLogs(): { logger: Logger; lines: LogLine[]; text: () => string } {
  const raw: string[] = [];
  const lines: LogLine[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write(line: string): void {
        raw.push(line);
        lines.push(JSON.parse(line) as LogLine);
      },
    },
  );
  return { logger, lines, text: () => raw.join('') };
}

// The agent's description comes as newline-terminated JSON lines on its describe stream (registry.ts).
/**
 * Calls `onLine` with each newline-terminated line of `stream`, never holding more than `maxBytes`
 * of one line: a longer one calls `onOverflow` once and reads no more (the caller ends the stream).
 */
export function readLines(
  stream: { on(event: 'data', listener: (chunk: Buffer) => void): unknown },
  maxBytes: number,
  onLine: (line: Buffer) => void,
  onOverflow: (bytes: number) => void,
): void {
  let held: Buffer[] = [];
  let heldBytes = 0;
  let over = false;
  stream.on('data', (chunk: Buffer) => {
    if (over) return;
    let start = 0;
    for (let newline = chunk.indexOf(10, start); newline >= 0; newline = chunk.indexOf(10, start)) {
      const line = Buffer.concat([...held, chunk.subarray(start, newline)]);
      held = [];
      heldBytes = 0;
      start = newline + 1;
      if (line.length > maxBytes) return overflow(line.length);
      onLine(line);
      if (over) return;
    }
    if (start < chunk.length) {
      held.push(chunk.subarray(start));
      heldBytes += chunk.length - start;
      if (heldBytes > maxBytes) overflow(heldBytes);
    }
  });
  function overflow(bytes: number): void {
    over = true;
    held = [];
    onOverflow(bytes);
  }
}

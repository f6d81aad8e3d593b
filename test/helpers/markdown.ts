// Pure readers of Markdown text, for the tests that hold the docs to the code.

/** A fenced code block of a Markdown file, with the HTML comment just before it (if any). */
export interface CodeBlock {
  language: string;
  /** The block's text, without its fences, ending with a newline. */
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The text of an HTML comment on the line(s) just before the fence, trimmed. */
  note: string | undefined;
}

/** Every fenced (```) block of a Markdown text, in order. Pure: no file access. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    blocks.push({ language: open[1]!, code: body.map((l) => `${l}\n`).join(''), line: start + 1, note: noteBefore(lines, start) });
  }
  return blocks;
}

/** The HTML comment ending on the last non-blank line before `fence`, if there is one. */
function noteBefore(lines: string[], fence: number): string | undefined {
  let end = fence - 1;
  while (end >= 0 && lines[end]!.trim() === '') end--;
  if (end < 0 || !lines[end]!.trimEnd().endsWith('-->')) return undefined;
  let begin = end;
  while (begin >= 0 && !lines[begin]!.includes('<!--')) begin--;
  if (begin < 0) return undefined;
  const text = lines.slice(begin, end + 1).join('\n');
  return text.slice(text.lastIndexOf('<!--') + 4, text.lastIndexOf('-->')).trim();
}

/**
 * The names a page gives a heading of their own (`## `/`### `/`#### ` then the name in backticks,
 * optionally after `new `), in order.
 */
export function documentedNames(markdown: string): string[] {
  return [...markdown.matchAll(/^#{2,4} `(?:new )?([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]!);
}

/** The file part of every relative Markdown link (`[text](path#anchor)`), outside inline code. */
export function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!.split('#')[0]!)
    .filter((target) => target !== '' && !/^[a-z]+:/i.test(target));
}

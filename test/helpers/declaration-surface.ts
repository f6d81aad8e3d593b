// What a package's stable entry points promise, read from the emitted declarations (.d.ts text):
// the installed TypeScript (7, "tsgo") has no JavaScript compiler API, and the emitted text is
// regular enough to read with a small top-level statement splitter.
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';

/** One declaration, named by the .d.ts file that declares it and its name there. */
export interface Origin {
  file: string;
  name: string;
}

/** A type a public declaration references that no stable entry exports. */
export interface Leak {
  /** The public declaration, as `file#name`, files relative to the declarations' root. */
  from: string;
  /** The internal-only type it references, as `file#name`. */
  type: string;
}

interface ParsedModule {
  /** Top-level statements, comments blanked out. */
  statements: string[];
  /** Local name -> where an `import` took it from (relative imports only). */
  imports: Map<string, Origin>;
  /** Names declared by a top-level statement of this file. */
  declared: Set<string>;
}

const parsed = new Map<string, ParsedModule>();

/** Comments become spaces (strings kept: an import's specifier is one), so a word in them is never taken for a reference. */
function blank(text: string): string {
  let out = '';
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === quote) quote = '';
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end < 0 ? text.length : end + 2;
      out += text.slice(i, stop).replace(/[^\n]/g, ' ');
      i = stop - 1;
    } else if (c === '/' && text[i + 1] === '/') {
      const end = text.indexOf('\n', i);
      const stop = end < 0 ? text.length : end;
      out += ' '.repeat(stop - i);
      i = stop - 1;
    } else {
      if (c === "'" || c === '"' || c === '`') quote = c;
      out += c;
    }
  }
  return out;
}

/**
 * Top-level statements: a `;` at depth 0 ends one, and so does the `}` closing a class,
 * interface, enum or namespace body (those carry no `;` after their brace).
 */
function splitStatements(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = '';
      continue;
    }
    if (c === "'" || c === '"' || c === '`') quote = c;
    else if (c === '{' || c === '(' || c === '[') depth++;
    else if (c === '}' || c === ')' || c === ']') {
      depth--;
      if (depth === 0 && c === '}') {
        const head = text.slice(start, i + 1).trim();
        if (/^(?:export\s+)?(?:declare\s+)?(?:abstract\s+)?(?:class|interface|enum|namespace|module)\b/.test(head)) {
          out.push(head);
          start = i + 1;
        }
      }
    } else if (c === ';' && depth === 0) {
      out.push(text.slice(start, i + 1).trim());
      start = i + 1;
    }
  }
  const rest = text.slice(start).trim();
  if (rest) out.push(rest);
  return out.filter((s) => s.length > 0);
}

function resolveSpecifier(file: string, spec: string): string {
  return resolve(dirname(file), spec.replace(/\.js$/, '.d.ts'));
}

/** `a as b, type c` -> [[a, b], [c, c]] */
function namesIn(list: string): Array<[string, string]> {
  return list
    .split(',')
    .map((s) => s.trim().replace(/^type\s+/, ''))
    .filter((s) => s.length > 0)
    .map((s) => {
      const [from, as] = s.split(/\s+as\s+/);
      return [from!.trim(), (as ?? from!).trim()];
    });
}

const DECLARED =
  /^(?:export\s+)?(?:declare\s+)?(?:abstract\s+)?(?:class|interface|type|enum|function|const|let|var|namespace)\s+([A-Za-z_$][\w$]*)/;

function parse(file: string): ParsedModule {
  const known = parsed.get(file);
  if (known) return known;
  const statements = splitStatements(blank(readFileSync(file, 'utf8')));
  const imports = new Map<string, Origin>();
  const declared = new Set<string>();
  for (const s of statements) {
    const imp = /^import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*['"](\.[^'"]+)['"]/.exec(s);
    if (imp) for (const [name, local] of namesIn(imp[1]!)) imports.set(local, { file: resolveSpecifier(file, imp[2]!), name });
    const dec = DECLARED.exec(s);
    if (dec) declared.add(dec[1]!);
  }
  const module = { statements, imports, declared };
  parsed.set(file, module);
  return module;
}

/** Every name a module exports, each resolved to the file that declares it. */
export function exportsOf(file: string, seen = new Set<string>()): Map<string, Origin> {
  const out = new Map<string, Origin>();
  if (seen.has(file)) return out;
  seen.add(file);
  const { statements, imports } = parse(file);
  for (const s of statements) {
    const star = /^export\s+\*\s+from\s*['"](\.[^'"]+)['"]/.exec(s);
    if (star) {
      for (const [name, origin] of exportsOf(resolveSpecifier(file, star[1]!), seen)) out.set(name, origin);
      continue;
    }
    const reexport = /^export\s+(?:type\s+)?\{([^}]*)\}\s*(?:from\s*['"](\.[^'"]+)['"])?/.exec(s);
    if (reexport) {
      for (const [name, as] of namesIn(reexport[1]!)) {
        if (reexport[2] !== undefined) out.set(as, originOf(resolveSpecifier(file, reexport[2]), name));
        else out.set(as, imports.get(name) ? originOf(imports.get(name)!.file, imports.get(name)!.name) : { file, name });
      }
      continue;
    }
    const dec = /^export\s/.test(s) ? DECLARED.exec(s) : null;
    if (dec) out.set(dec[1]!, { file, name: dec[1]! });
  }
  return out;
}

/** Where `name`, as exported by `file`, is really declared (re-exports followed). */
function originOf(file: string, name: string): Origin {
  if (parse(file).declared.has(name)) return { file, name };
  return exportsOf(file).get(name) ?? { file, name };
}

const key = (o: Origin) => `${o.file}#${o.name}`;

/**
 * The types the declaration of `origin` references that no stable entry exports. Private members
 * are emitted without a type (`private readonly x;`), so whatever they hold is not counted.
 */
function referencedOrigins(origin: Origin): Origin[] {
  const { statements, imports, declared } = parse(origin.file);
  const out: Origin[] = [];
  for (const s of statements) {
    if (DECLARED.exec(s)?.[1] !== origin.name) continue;
    const text = s.replace(/^\s*(?:private|protected)\b[^;\n]*;?/gm, '').replace(/^\s*#private;/gm, '');
    for (const m of text.matchAll(/import\(\s*['"](\.[^'"]+)['"]\s*\)\.([A-Za-z_$][\w$]*)/g)) {
      out.push(originOf(resolveSpecifier(origin.file, m[1]!), m[2]!));
    }
    const words = text.replace(/'[^'\n]*'|"[^"\n]*"/g, (m) => ' '.repeat(m.length));
    // A word in a type position: not a member name (followed by `:`, `?:` or `(`), not after a `.`.
    for (const m of words.matchAll(/(?<![\w$.])([A-Za-z_$][\w$]*)(?![\w$])(?!\s*\??\s*[:(])/g)) {
      const word = m[1]!;
      if (word === origin.name) continue;
      const imported = imports.get(word);
      if (imported) out.push(originOf(imported.file, imported.name));
      else if (declared.has(word)) out.push({ file: origin.file, name: word });
    }
  }
  return out;
}

/**
 * Every type a stable entry's public declarations reference but no stable entry exports. `entries`
 * are the stable entries' .d.ts files; `root` only shortens the names in the answer.
 */
export function leaksOf(entries: string[], root: string): Leak[] {
  const publicOrigins = new Map<string, Origin>();
  for (const entry of entries) for (const origin of exportsOf(entry).values()) publicOrigins.set(key(origin), origin);
  const leaks = new Map<string, Leak>();
  const show = (o: Origin) => `${relative(root, o.file)}#${o.name}`;
  for (const origin of publicOrigins.values()) {
    for (const ref of referencedOrigins(origin)) {
      if (publicOrigins.has(key(ref))) continue;
      const leak = { from: show(origin), type: show(ref) };
      leaks.set(`${leak.from} ${leak.type}`, leak);
    }
  }
  return [...leaks.values()].sort((a, b) => (a.from + a.type).localeCompare(b.from + b.type));
}

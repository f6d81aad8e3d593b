import { readFile } from 'node:fs/promises';
import { LineCounter, isMap, isNode, isScalar, parseDocument, type Document } from 'yaml';
import { ErrorCodes, GateError } from '../errors.js';
import type { LoadedConfig } from './types.js';
import { formatPath, type ConfigIssue, type PathSegment } from './checker.js';
import { validateConfig } from './validate.js';

/** One problem in a configuration file, with where it is. */
export interface ConfigProblem {
  /** Key path such as `proxy_service.postgres_listen_addr`. */
  path: string;
  /** 1-based line in the file, when known. */
  line: number | undefined;
  message: string;
}

/** A configuration that cannot be used. The message lists every problem, each naming its key path. */
export class ConfigError extends GateError {
  readonly problems: ConfigProblem[];
  constructor(source: string, problems: ConfigProblem[], options?: { cause?: unknown }) {
    const lines = problems.map((p) => `  ${p.line !== undefined ? `line ${p.line}: ` : ''}${p.path}: ${p.message}`);
    super(ErrorCodes.CONFIG_INVALID, `invalid configuration ${source}:\n${lines.join('\n')}`, options);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface ParseConfigOptions {
  /** Where the text came from (a file path), used in messages. Default `<config>`. */
  source?: string;
}

/** Line of the key at `path` (or, for a list item, of the item), so a problem points where it is written. */
function lineOf(doc: Document, counter: LineCounter, path: PathSegment[]): number | undefined {
  let offset: number | undefined;
  const last = path[path.length - 1];
  if (typeof last === 'string') {
    const parent = path.length === 1 ? doc.contents : doc.getIn(path.slice(0, -1), true);
    if (isMap(parent)) {
      const pair = parent.items.find((item) => isScalar(item.key) && String(item.key.value) === last);
      if (pair && isNode(pair.key) && pair.key.range) offset = pair.key.range[0];
    }
  }
  if (offset === undefined) {
    const node = path.length === 0 ? doc.contents : doc.getIn(path, true);
    if (isNode(node) && node.range) offset = node.range[0];
  }
  return offset === undefined ? undefined : counter.linePos(offset).line;
}

/** What a file's validator returns: the typed value when there is no issue, and what it found. */
export interface Validated<T> {
  value: T | undefined;
  issues: ConfigIssue[];
  warnings: ConfigIssue[];
}

/**
 * Parses YAML text and hands the value to `validate`. Throws a ConfigError (GATE_ERR_CONFIG_INVALID)
 * naming the key path and line of every problem; returns the value and the warnings (each
 * `source:line: path: message`). Shared by every configuration file gate reads (the proxy's, the
 * agent's), so their errors read the same.
 */
export function parseYamlFile<T>(text: string, source: string, validate: (raw: unknown) => Validated<T>): { value: T; warnings: string[] } {
  const counter = new LineCounter();
  // YAML 1.2 core schema (the package default): `on`/`yes` stay strings, duplicate keys are errors.
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((err) => ({
        path: '(YAML syntax)',
        line: counter.linePos(err.pos[0]).line,
        message: err.message.split('\n')[0] ?? err.message,
      })),
    );
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ConfigError(source, [{ path: '(YAML)', line: undefined, message: (err as Error).message }], { cause: err });
  }
  const result = validate(raw ?? undefined);
  const locate = (issue: ConfigIssue): ConfigProblem => ({
    path: formatPath(issue.path),
    line: lineOf(doc, counter, issue.path),
    message: issue.message,
  });
  if (result.value === undefined) {
    const problems = result.issues.map(locate);
    // File order reads best; validation order (by section) is the tie-break.
    problems.sort((a, b) => (a.line ?? Number.MAX_SAFE_INTEGER) - (b.line ?? Number.MAX_SAFE_INTEGER));
    throw new ConfigError(source, problems);
  }
  const warnings = result.warnings.map((w) => {
    const p = locate(w);
    return `${source}${p.line !== undefined ? `:${p.line}` : ''}: ${p.path}: ${p.message}`;
  });
  return { value: result.value, warnings };
}

/** Reads a file's text; a missing or unreadable file is a ConfigError naming it. */
export async function readConfigText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError(path, [{ path: '(file)', line: undefined, message: `cannot read the file: ${reason}` }], {
      cause: err,
    });
  }
}

/**
 * Parses and validates configuration text. Throws a ConfigError (GATE_ERR_CONFIG_INVALID) naming the
 * key path and what was expected for every problem; returns the typed configuration and warnings
 * (each `path: message`) for what is allowed but probably not meant.
 */
export function parseConfig(text: string, options: ParseConfigOptions = {}): LoadedConfig {
  const source = options.source ?? '<config>';
  const { value, warnings } = parseYamlFile(text, source, (raw) => {
    const result = validateConfig(raw, source);
    return { value: result.config, issues: result.issues, warnings: result.warnings };
  });
  return { config: value, warnings };
}

/** Reads and parses a configuration file (see `parseConfig`). A missing file is a ConfigError too. */
export async function loadConfig(path: string): Promise<LoadedConfig> {
  return parseConfig(await readConfigText(path), { source: path });
}

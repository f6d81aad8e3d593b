/**
 * The building blocks of a configuration file's declaration: each file (gate.yaml, agent.yaml) is
 * declared once, as a tree of JSON Schema (draft-07) nodes. From that one tree come the key lists
 * the readers check (`keysOf`: unknown keys, "did you mean", "it belongs under"), and the JSON
 * Schema editors use to validate and complete the file (`jsonSchemaOf`, written to schema/ by
 * json-schema-files.ts).
 *
 * Why not a schema library (zod, valibot, TypeBox): each would own the messages, and keeping
 * today's (the key path, what was expected in the operator's words, "did you mean" and "it belongs
 * under", values checked by parsers the platform defines such as durations, addresses, CA pins,
 * and rules across keys such as listener collisions) means a custom refinement on almost every
 * key, so the library would add a runtime dependency and do little of the work. Its one gift, a
 * JSON Schema, comes here from a declaration that already is one. The readers (validate.ts,
 * agent-config.ts) stay code: they turn the file into the normalised configuration (milliseconds,
 * parsed addresses), which a JSON Schema cannot express.
 *
 * Defaults shown to editors are the readers' own constants, so the two cannot drift apart.
 *
 * The JSON Schema is the outer bound of what the readers accept: it never refuses a file the
 * readers take (a test checks the shipped examples), and leaves to them what only code can check.
 */

import { formatDuration } from './duration.js';
import { ErrorCodes, GateError } from '../errors.js';

type JsonType = 'string' | 'integer' | 'number' | 'boolean' | 'object' | 'array' | 'null';

/** A JSON Schema node, the subset the declarations use. */
export interface SchemaNode {
  description?: string;
  type?: JsonType | JsonType[];
  enum?: readonly unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  default?: unknown;
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
  required?: readonly string[];
  additionalProperties?: boolean | SchemaNode;
  propertyNames?: SchemaNode;
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  not?: SchemaNode;
}

/** Go-style durations as `parseDuration` reads them (`10s`, `500ms`, `1m30s`), or a bare 0. */
const DURATION_PATTERN = '^\\s*(?:0|(?:[0-9]+(?:\\.[0-9]+)?(?:ms|s|m|h))+)\\s*$';

/** Constructors for the nodes, so a declaration reads as a list of keys with what each takes. */
export const schema = {
  /**
   * A mapping with a fixed set of keys; unknown keys are errors. `nullable`: an empty section
   * (`auth_service:` with nothing under it) reads as an empty mapping.
   */
  section(
    description: string,
    properties: Record<string, SchemaNode>,
    options: { required?: string[]; nullable?: boolean } = {},
  ): SchemaNode {
    return {
      description,
      type: options.nullable ? ['object', 'null'] : 'object',
      properties,
      ...(options.required ? { required: options.required } : {}),
      additionalProperties: false,
    };
  },
  /** A mapping whose keys are names the operator chooses (channel names), each value alike. */
  mapOf(description: string, keyPattern: string, maxKeyLength: number, value: SchemaNode): SchemaNode {
    return { description, type: 'object', propertyNames: { pattern: keyPattern, maxLength: maxKeyLength }, additionalProperties: value };
  },
  /** `nullable`: an empty value (`token:`) reads as absent. */
  string(description: string, extra: Pick<SchemaNode, 'pattern' | 'minLength' | 'default'> & { nullable?: boolean } = {}): SchemaNode {
    const { nullable, ...rest } = extra;
    return { description, type: nullable ? ['string', 'null'] : 'string', ...rest };
  },
  oneOf(description: string, values: readonly unknown[], fallback?: unknown): SchemaNode {
    return { description, enum: values, ...(fallback === undefined ? {} : { default: fallback }) };
  },
  integer(description: string, minimum: number, options: { maximum?: number; default?: number } = {}): SchemaNode {
    return { description, type: 'integer', minimum, ...options };
  },
  boolean(description: string): SchemaNode {
    return { description, type: 'boolean' };
  },
  /** `fallbackMs`: the reader's default, shown to editors in the file's own spelling (`10s`). */
  duration(description: string, fallbackMs?: number): SchemaNode {
    return {
      description,
      anyOf: [{ type: 'string', pattern: DURATION_PATTERN }, { enum: [0] }],
      ...(fallbackMs === undefined ? {} : { default: formatDuration(fallbackMs) }),
    };
  },
  /** A fraction above 0 and at most 1, written 0.8 or 80%. */
  fraction(description: string, fallback: number): SchemaNode {
    return {
      description,
      anyOf: [
        { type: 'number', exclusiveMinimum: 0, maximum: 1 },
        { type: 'string', pattern: '^\\s*[0-9]+(?:\\.[0-9]+)?%\\s*$' },
      ],
      default: fallback,
    };
  },
  list(description: string, items: SchemaNode, options: { nullable?: boolean } = {}): SchemaNode {
    return { description, type: options.nullable ? ['array', 'null'] : 'array', items };
  },
  /** One string or a list of them (public addresses, agent names). */
  stringOrList(description: string, item: SchemaNode = { type: 'string' }): SchemaNode {
    return { description, anyOf: [item, { type: 'array', items: item }] };
  },
  /** A key that was once read and is now refused with a message saying what replaced it. */
  retired(description: string): SchemaNode {
    return { description, not: {} };
  },
};

/**
 * The keys of the mapping at `path` in a declaration: `'*'` steps into a list's items or a name
 * mapping's values. Throws when the path names no mapping (a mistake in this repository, not in a
 * configuration file).
 */
export function keysOf(root: SchemaNode, ...path: string[]): string[] {
  let node: SchemaNode | undefined = root;
  for (const step of path) {
    if (step === '*') node = node.items ?? (typeof node.additionalProperties === 'object' ? node.additionalProperties : undefined);
    else node = node.properties?.[step];
    if (node === undefined) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `configuration schema: no node at ${path.join('.')}`);
  }
  if (!node.properties)
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `configuration schema: ${path.join('.') || 'the top'} is not a mapping`);
  return Object.keys(node.properties);
}

/** The standalone JSON Schema document for a file, as written to schema/<file>.schema.json. */
// Draft-07: the YAML language server, which editors use for the `$schema=` line, reads drafts up to 7.
export function jsonSchemaOf(root: SchemaNode, title: string): Record<string, unknown> {
  return { $schema: 'http://json-schema.org/draft-07/schema#', title, ...root };
}

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AGENT_SCHEMA } from './agent-schema.js';
import { GATE_SCHEMA } from './gate-schema.js';
import { jsonSchemaOf } from './schema.js';

/**
 * The JSON Schema files editors read (`# yaml-language-server: $schema=...` as a file's first
 * line), generated from the declarations and committed under schema/ so they ship in the npm
 * package and the Debian one beside examples/. A test fails when a committed file and its
 * declaration disagree; `npm run schema` rewrites them.
 */
export const JSON_SCHEMA_FILES = {
  'gate.schema.json': jsonSchemaOf(GATE_SCHEMA, 'gate-mux proxy configuration (gate.yaml)'),
  'agent.schema.json': jsonSchemaOf(AGENT_SCHEMA, 'gate-mux agent configuration (agent.yaml)'),
} as const;

export type JsonSchemaFileName = keyof typeof JSON_SCHEMA_FILES;

/** A schema file's text as committed: two-space JSON and a final newline. */
export function jsonSchemaText(name: JsonSchemaFileName): string {
  return `${JSON.stringify(JSON_SCHEMA_FILES[name], null, 2)}\n`;
}

/** Writes every schema file into `dir`. */
export async function writeJsonSchemaFiles(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const name of Object.keys(JSON_SCHEMA_FILES) as JsonSchemaFileName[]) {
    await writeFile(join(dir, name), jsonSchemaText(name));
  }
}

// `node dist/lib/config/json-schema-files.js DIR` (`npm run schema` gives schema/): rewrites the files.
if (process.argv[1] !== undefined && process.argv[2] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await writeJsonSchemaFiles(process.argv[2]);
}

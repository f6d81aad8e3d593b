import { fileURLToPath } from 'node:url';

// dist/lib/cli/*.js, three folders under the package root, in the repository and when installed.
const root = new URL('../../../', import.meta.url);

/** This package's version (package.json), for `--version` and the proxy's `server_version`. */
export { packageVersion } from '../wire/package-version.js';

/** The proxy's embedded default configuration, shipped with the package as examples/gate.yaml. */
export const defaultConfigPath: string = fileURLToPath(new URL('examples/gate.yaml', root));

/** The agent configuration's JSON Schema, shipped with the package as schema/agent.schema.json. */
export const agentSchemaPath: string = fileURLToPath(new URL('schema/agent.schema.json', root));

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// dist/lib/cli/*.js, three folders under the package root, in the repository and when installed.
const root = new URL('../../../', import.meta.url);

/** This package's version (package.json), for `--version` and the proxy's `server_version`. */
export const packageVersion: string = (JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version: string }).version;

/** The proxy's embedded default configuration, shipped with the package as examples/gate.yaml. */
export const defaultConfigPath: string = fileURLToPath(new URL('examples/gate.yaml', root));

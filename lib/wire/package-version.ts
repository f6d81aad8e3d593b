import { readFileSync } from 'node:fs';

// dist/lib/wire/*.js, three folders under the package root, in the repository and when installed.
const root = new URL('../../../', import.meta.url);

/**
 * This package's version (package.json): the proxy's `server_version`, and the version an agent
 * tells the proxy it runs (checked against the proxy's own at admission, so it is part of what
 * both sides agree on).
 */
export const packageVersion: string = (JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version: string }).version;

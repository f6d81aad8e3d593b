import type { ParseArgsConfig } from 'node:util';

/**
 * The flags `gate-mux agent` and `gate-mux agent configure` share: where the proxy is and who the
 * agent is, spelled once so the file `configure` writes and the flags that override it agree.
 */
export const AGENT_JOIN_OPTIONS = {
  help: { type: 'boolean', short: 'h', default: false },
  proxy: { type: 'string' },
  'tunnel-addr': { type: 'string' },
  'server-name': { type: 'string' },
  token: { type: 'string' },
  'ca-pin': { type: 'string' },
  name: { type: 'string' },
  'state-dir': { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

/**
 * `gate-mux inventory ls`: the agents of the whole cluster (server ID, hostname, services,
 * version, upgrader), as any proxy answers them from the route store: through its admin endpoint
 * (lib/cli/admin-client.ts: on the proxy's host with its configuration, elsewhere with an identity
 * whose roles allow `read` on `inventory`), or its diagnostics listener with --diag. The
 * enrollment procedure's first step is `inventory ls --upgrader=none`: the agents not yet enrolled
 * in automatic updates.
 */
import { readFile } from 'node:fs/promises';
import { formatAddress, parseAddress, type HostPort } from '../config/address.js';
import type { InventoryRow } from '../cluster/inventory.js';
import { fetchText } from '../client/fetch-text.js';
import { ErrorCodes, GateError, toGateError, type ErrorCode } from '../errors.js';
import { adminCall, adminConnection, CONNECTION_OPTIONS, CONNECTION_USAGE, type ConnectionFlags } from './admin-client.js';
import { parseCommand, usageError } from './usage.js';

export { INSTALLED_CONFIG_PATH } from './admin-client.js';
const TIMEOUT_MS = 10_000;
/** The answer of a cluster of 100,000 agents is some tens of megabytes; more is not an inventory. */
const MAX_ANSWER_BYTES = 64 << 20;

export const INVENTORY_USAGE = `usage: gate-mux inventory ls [--upgrader=none|unit|...] [--format text|json]
                            [connection options | --diag HOST:PORT [--token-file FILE]]

Lists the agents of the cluster, once each, however many proxies hold their tunnels: any proxy
answers for all of them. Columns: Server ID, Hostname, Services, Version, Upgrader (none: not
enrolled in automatic updates; unknown: an agent older than self-descriptions).

  --upgrader NAME   only the agents with this upgrader (--upgrader=none: those to enroll)
  --format FORMAT   text (a table, default) or json (an array of objects: server_id, hostname,
                    services, version, upgrader, agent, proxies, since)
  --diag HOST:PORT  ask a proxy's diagnostics listener (diag_addr) instead of its admin endpoint
  --token-file FILE with --diag: the listener's bearer token (diag_token_file), when it has one
${CONNECTION_USAGE}`;

export async function main(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === '--help' || verb === '-h' || verb === 'help') {
    process.stdout.write(INVENTORY_USAGE);
    return 0;
  }
  if (verb !== 'ls')
    return usageError(
      verb === undefined ? 'gate-mux inventory: which? (ls)' : `gate-mux inventory: unknown subcommand '${verb}'`,
      INVENTORY_USAGE,
    );
  const parsed = parseCommand(
    {
      args: rest,
      options: {
        upgrader: { type: 'string' },
        format: { type: 'string', default: 'text' },
        diag: { type: 'string' },
        'token-file': { type: 'string' },
        ...CONNECTION_OPTIONS,
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    },
    INVENTORY_USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  if (values.help) {
    process.stdout.write(INVENTORY_USAGE);
    return 0;
  }
  if (values.format !== 'text' && values.format !== 'json')
    return usageError(`--format ${values.format}: expected text or json`, INVENTORY_USAGE);
  let rows: InventoryRow[];
  try {
    if (values.diag !== undefined) {
      const tokenFile = values['token-file'];
      rows = await fetchInventory(diagAddress(values.diag), tokenFile === undefined ? undefined : await readToken(tokenFile));
    } else rows = (await adminCall(await adminConnection(values as ConnectionFlags), 'inventory')) as unknown as InventoryRow[];
  } catch (err) {
    process.stderr.write(`gate-mux inventory: ${toGateError(err, ErrorCodes.FETCH_FAILED).message}\n`);
    return 1;
  }
  const wanted = values.upgrader;
  const shown = wanted === undefined ? rows : rows.filter((r) => r.upgrader === wanted);
  process.stdout.write(values.format === 'json' ? `${JSON.stringify(shown, null, 2)}\n` : inventoryTable(shown));
  return 0;
}

/** The token in `file`, trimmed. */
async function readToken(file: string): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch (err) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `cannot read the diagnostics token ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** `--diag`; an unspecified host (0.0.0.0, ::) is asked on loopback. */
function diagAddress(flag: string): HostPort {
  const parsed = parseAddress(flag);
  if (!parsed.ok) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `--diag ${flag}: ${parsed.reason}`);
  const address = parsed.address;
  if (address.host === '0.0.0.0') return { ...address, host: '127.0.0.1' };
  if (address.host === '::') return { ...address, host: '::1' };
  return address;
}

/**
 * GET /v1/inventory. Never through HTTPS_PROXY: the diagnostics listener is on this host or its
 * private network, which a corporate proxy does not reach. Errors carry a code: the listener's
 * own (GATE_ERR_STORE_UNAVAILABLE when it could not read the store), else GATE_ERR_FETCH_*.
 */
async function fetchInventory(diag: HostPort, token: string | undefined): Promise<InventoryRow[]> {
  const where = `http://${formatAddress(diag)}/v1/inventory`;
  const answer = await fetchText(where, {
    env: {},
    timeoutMs: TIMEOUT_MS,
    maxBytes: MAX_ANSWER_BYTES,
    ...(token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } }),
  });
  let body: unknown;
  try {
    body = JSON.parse(answer.body);
  } catch (err) {
    throw new GateError(
      ErrorCodes.FETCH_FAILED,
      `${where}: answered ${answer.status} with something other than JSON (is this a gate-mux proxy's diag_addr?)`,
      { cause: err },
    );
  }
  if (answer.status !== 200 || !Array.isArray(body)) {
    const error = body as { error?: unknown; code?: unknown };
    const code =
      typeof error.code === 'string' && (Object.values(ErrorCodes) as string[]).includes(error.code)
        ? (error.code as ErrorCode)
        : ErrorCodes.FETCH_FAILED;
    throw new GateError(code, `${where}: ${answer.status} ${code}: ${typeof error.error === 'string' ? error.error : 'not an inventory'}`);
  }
  return body as InventoryRow[];
}

const COLUMNS = ['Server ID', 'Hostname', 'Services', 'Version', 'Upgrader', 'Group'] as const;

/** The text table: the platform's columns in its order, then the rollout group; `-` for what an agent did not say. Pure. */
export function inventoryTable(rows: readonly InventoryRow[]): string {
  const cells = rows.map((r) => [
    r.server_id,
    r.hostname || '-',
    r.services.map((s) => `${s.kind}:${s.name}`).join(',') || '-',
    r.version || '-',
    r.upgrader || '-',
    r.update_group || '-',
  ]);
  const widths = COLUMNS.map((title, i) => Math.max(title.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: readonly string[]): string =>
    `${values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd()}\n`;
  return [line(COLUMNS), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('');
}

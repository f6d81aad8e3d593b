/**
 * `gate-mux inventory ls`: the agents of the whole cluster (server ID, hostname, services,
 * version, upgrader), as any proxy's diagnostics listener (`diag_addr`) answers them from the
 * route store. The enrollment procedure's first step is `inventory ls --upgrader=none`: the
 * agents not yet enrolled in automatic updates.
 */
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { formatAddress, parseAddress, type HostPort } from '../config/address.js';
import { loadConfig } from '../config/load.js';
import type { InventoryRow } from '../cluster/inventory.js';
import { parseCommand, usageError } from './usage.js';

/** Where a proxy installed from the packages keeps its configuration. */
export const INSTALLED_CONFIG_PATH = '/etc/gate/gate.yaml';
const TIMEOUT_MS = 10_000;
/** The answer of a cluster of 100,000 agents is some tens of megabytes; more is not an inventory. */
const MAX_ANSWER_BYTES = 64 << 20;

export const INVENTORY_USAGE = `usage: gate-mux inventory ls [--upgrader=none|unit|...] [--format text|json]
                            [--diag HOST:PORT | --config FILE]

Lists the agents of the cluster, once each, however many proxies hold their tunnels: any proxy
answers for all of them. Columns: Server ID, Hostname, Services, Version, Upgrader (none: not
enrolled in automatic updates; unknown: an agent older than self-descriptions).

  --upgrader NAME   only the agents with this upgrader (--upgrader=none: those to enroll)
  --format FORMAT   text (a table, default) or json (an array of objects: server_id, hostname,
                    services, version, upgrader, agent, proxies, since)
  --diag HOST:PORT  the proxy's diagnostics listener (diag_addr)
  --config FILE     read diag_addr from this proxy configuration (default ${INSTALLED_CONFIG_PATH})
`;

export async function main(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === '--help' || verb === '-h' || verb === 'help') {
    process.stdout.write(INVENTORY_USAGE);
    return 0;
  }
  if (verb !== 'ls') return usageError(verb === undefined ? 'gate-mux inventory: which? (ls)' : `gate-mux inventory: unknown subcommand '${verb}'`, INVENTORY_USAGE);
  const parsed = parseCommand(
    {
      args: rest,
      options: {
        upgrader: { type: 'string' },
        format: { type: 'string', default: 'text' },
        diag: { type: 'string' },
        config: { type: 'string' },
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
  if (values.format !== 'text' && values.format !== 'json') return usageError(`--format ${values.format}: expected text or json`, INVENTORY_USAGE);
  let rows: InventoryRow[];
  try {
    const diag = await diagAddress(values.diag, values.config);
    rows = await fetchInventory(diag);
  } catch (err) {
    process.stderr.write(`gate-mux inventory: ${(err as Error).message}\n`);
    return 1;
  }
  const wanted = values.upgrader;
  const shown = wanted === undefined ? rows : rows.filter((r) => r.upgrader === wanted);
  process.stdout.write(values.format === 'json' ? `${JSON.stringify(shown, null, 2)}\n` : inventoryTable(shown));
  return 0;
}

/** `--diag`, else the configuration's `diag_addr`; an unspecified host (0.0.0.0, ::) is asked on loopback. */
async function diagAddress(flag: string | undefined, configPath: string | undefined): Promise<HostPort> {
  let address: HostPort;
  if (flag !== undefined) {
    const parsed = parseAddress(flag);
    if (!parsed.ok) throw new Error(`--diag ${flag}: ${parsed.reason}`);
    address = parsed.address;
  } else {
    const path = configPath ?? INSTALLED_CONFIG_PATH;
    if (configPath === undefined && !existsSync(path)) throw new Error(`no ${path}: give the proxy's diagnostics listener with --diag HOST:PORT, or its configuration with --config FILE`);
    const { config } = await loadConfig(path);
    if (!config.diagAddr) throw new Error(`${path} sets no diag_addr: the inventory is served on the proxy's diagnostics listener (set diag_addr, e.g. 127.0.0.1:3000)`);
    address = config.diagAddr;
  }
  if (address.host === '0.0.0.0') return { ...address, host: '127.0.0.1' };
  if (address.host === '::') return { ...address, host: '::1' };
  return address;
}

function fetchInventory(diag: HostPort): Promise<InventoryRow[]> {
  const where = `http://${formatAddress(diag)}/v1/inventory`;
  return new Promise((resolve, reject) => {
    const req = request({ host: diag.host, port: diag.port, path: '/v1/inventory', method: 'GET', timeout: TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > MAX_ANSWER_BYTES) return req.destroy(new Error(`${where}: more than ${MAX_ANSWER_BYTES} bytes`));
        chunks.push(chunk);
      });
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return reject(new Error(`${where}: answered ${res.statusCode} with something other than JSON (is this a gate-mux proxy's diag_addr?)`));
        }
        if (res.statusCode !== 200 || !Array.isArray(body)) {
          const error = body as { error?: string; code?: string };
          return reject(new Error(`${where}: ${res.statusCode}${error.code ? ` ${error.code}` : ''}: ${error.error ?? 'not an inventory'}`));
        }
        resolve(body as InventoryRow[]);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${where}: no answer within ${TIMEOUT_MS / 1000} s`)));
    req.on('error', (err) => reject(new Error(err.message.startsWith(where) ? err.message : `${where}: ${err.message}`)));
    req.end();
  });
}

const COLUMNS = ['Server ID', 'Hostname', 'Services', 'Version', 'Upgrader'] as const;

/** The text table: the platform's columns in its order; `-` for what an agent did not say. Pure. */
export function inventoryTable(rows: readonly InventoryRow[]): string {
  const cells = rows.map((r) => [r.server_id, r.hostname || '-', r.services.map((s) => `${s.kind}:${s.name}`).join(',') || '-', r.version || '-', r.upgrader || '-']);
  const widths = COLUMNS.map((title, i) => Math.max(title.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: readonly string[]): string => `${values.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd()}\n`;
  return [line(COLUMNS), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('');
}

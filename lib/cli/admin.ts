/**
 * The admin commands, as the platform names them: `gate-mux create FILE|-` (`-f` overwrites),
 * `gate-mux get KIND[/NAME]`, `gate-mux rm KIND/NAME`, `gate-mux status`, and `gate-mux users
 * add|update|rm|renew`. Each is one call to a proxy's admin endpoint (lib/cli/admin-client.ts
 * says how it is reached and as whom); the proxy validates, authorizes and logs.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { parseDuration } from '../config/duration.js';
import { ErrorCodes, GateError, toGateError } from '../errors.js';
import { createKeyAndRequest } from '../pki/certificate-request.js';
import {
  adminCall,
  adminConnection,
  CONNECTION_OPTIONS,
  CONNECTION_USAGE,
  formatIdentityFile,
  parseIdentityFile,
  type ConnectionFlags,
} from './admin-client.js';
import { parseCommand, usageError } from './usage.js';
import { SINGLETON_NAMES } from '../admin/resource-kinds.js';

/** A manifest bigger than this is refused before it is sent (the proxy's own bound is the same). */
const MAX_MANIFEST_BYTES = 256 * 1024;

export const CREATE_USAGE = `usage: gate-mux create [-f] FILE|-  [connection options]

Creates the resources of FILE (YAML; several documents separated by ---; - reads stdin): a
cluster_maintenance_config (the agents' maintenance window), a role (kind: role, version: v7), an
autoupdate_config or an autoupdate_version (a managed rollout of agent versions).
A resource that exists is refused ("already exists: use -f"); -f overwrites it. An invalid file
changes nothing and every problem is listed with its key.

  -f, --force         overwrite resources that exist (needs the update verb on them)
${CONNECTION_USAGE}`;

export const GET_USAGE = `usage: gate-mux get KIND[/NAME] [--format yaml|json]  [connection options]

Prints resources of the cluster store: cluster_maintenance_config, role/NAME, user/NAME,
autoupdate_config, autoupdate_version, autoupdate_agent_rollout (the rollout's state); a kind
without a name lists them all (needs read or list on it).

  --format FORMAT     yaml (default) or json
${CONNECTION_USAGE}`;

export const RM_USAGE = `usage: gate-mux rm KIND/NAME  [connection options]

Removes a resource (needs the delete verb on its kind). rm user/NAME is users rm NAME.
${CONNECTION_USAGE}`;

export const STATUS_USAGE = `usage: gate-mux status  [connection options]

Prints the cluster name, the proxy's version, the CA pin agents are given, and how many proxies
and agents the cluster store lists.
${CONNECTION_USAGE}`;

export const USERS_USAGE = `usage: gate-mux users add NAME --roles a,b --out FILE [--ttl DURATION]
       gate-mux users update NAME --set-roles "a,b"
       gate-mux users rm NAME
       gate-mux users renew --identity FILE [--out FILE] [--ttl DURATION]
                                              [connection options]

add     makes user NAME with these roles and writes its identity file (a certificate naming the
        user, its key and the cluster CA; valid for --ttl, default 12h, at most 30d) to --out
update  replaces the user's roles (in effect at its next request)
rm      removes the user: its identity file is refused from then on
renew   a fresh certificate for the identity file's own user (before it expires)
${CONNECTION_USAGE}`;

function help(usage: string): number {
  process.stdout.write(usage);
  return 0;
}

function fail(command: string, err: unknown): number {
  const error = toGateError(err, ErrorCodes.FETCH_FAILED);
  process.stderr.write(`gate-mux ${command}: ${error.code}: ${error.message}\n`);
  return 1;
}

type Values = ConnectionFlags & {
  force?: boolean;
  format?: string;
  roles?: string;
  'set-roles'?: string;
  out?: string;
  ttl?: string;
  help?: boolean;
};

function parse(
  argv: string[],
  usage: string,
  extra: Record<string, { type: 'string' | 'boolean'; short?: string }> = {},
): { values: Values; positionals: string[] } | number {
  return parseCommand(
    {
      args: argv,
      options: { ...CONNECTION_OPTIONS, ...extra, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: true,
    },
    usage,
  );
}

async function readManifest(path: string): Promise<string> {
  const text =
    path === '-'
      ? await readStdin()
      : await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
          throw new GateError(ErrorCodes.INVALID_ARGUMENT, `cannot read ${path} (${err.code ?? err.message})`, { cause: err });
        });
  if (Buffer.byteLength(text) > MAX_MANIFEST_BYTES)
    throw new GateError(ErrorCodes.REQUEST_TOO_LARGE, `${path}: over ${MAX_MANIFEST_BYTES} bytes`);
  return text;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_MANIFEST_BYTES) throw new GateError(ErrorCodes.REQUEST_TOO_LARGE, `stdin: over ${MAX_MANIFEST_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function createMain(argv: string[]): Promise<number> {
  const parsed = parse(argv, CREATE_USAGE, { force: { type: 'boolean', short: 'f' } });
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  if (values.help) return help(CREATE_USAGE);
  if (positionals.length !== 1) return usageError('gate-mux create: one FILE (or - for stdin)', CREATE_USAGE);
  try {
    const manifest = await readManifest(positionals[0]!);
    const answer = await adminCall(await adminConnection(values as ConnectionFlags), 'create', { manifest, force: values.force === true });
    for (const applied of answer.applied as Array<{ message: string }>) process.stdout.write(`${applied.message}\n`);
    return 0;
  } catch (err) {
    return fail('create', err);
  }
}

/** `KIND[/NAME]`. */
function kindAndName(text: string): { kind: string; name?: string } {
  const slash = text.indexOf('/');
  return slash < 0 ? { kind: text } : { kind: text.slice(0, slash), name: text.slice(slash + 1) };
}

export async function getMain(argv: string[]): Promise<number> {
  const parsed = parse(argv, GET_USAGE, { format: { type: 'string' } });
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  if (values.help) return help(GET_USAGE);
  if (positionals.length !== 1) return usageError('gate-mux get: one KIND[/NAME]', GET_USAGE);
  const format = values.format ?? 'yaml';
  if (format !== 'yaml' && format !== 'json') return usageError(`--format ${format}: expected yaml or json`, GET_USAGE);
  try {
    const answer = await adminCall(await adminConnection(values as ConnectionFlags), 'get', kindAndName(positionals[0]!));
    const resources = answer.resources as Array<Record<string, unknown>>;
    if (format === 'json') process.stdout.write(`${JSON.stringify(isList(positionals[0]!) ? resources : resources[0], null, 2)}\n`);
    else process.stdout.write(resources.map((r) => stringify(r)).join('---\n'));
    return 0;
  } catch (err) {
    return fail('get', err);
  }
}

/** A `get` that lists (a kind without a name, other than the singleton). */
function isList(arg: string): boolean {
  return !arg.includes('/') && SINGLETON_NAMES[arg] === undefined;
}

export async function rmMain(argv: string[]): Promise<number> {
  const parsed = parse(argv, RM_USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  if (values.help) return help(RM_USAGE);
  if (positionals.length !== 1) return usageError('gate-mux rm: one KIND/NAME', RM_USAGE);
  try {
    const answer = await adminCall(await adminConnection(values as ConnectionFlags), 'rm', kindAndName(positionals[0]!));
    process.stdout.write(`${answer.message as string}\n`);
    return 0;
  } catch (err) {
    return fail('rm', err);
  }
}

export async function statusMain(argv: string[]): Promise<number> {
  const parsed = parse(argv, STATUS_USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  if (values.help) return help(STATUS_USAGE);
  if (positionals.length > 0) return usageError('gate-mux status: no arguments', STATUS_USAGE);
  try {
    const s = await adminCall(await adminConnection(values as ConnectionFlags), 'status');
    const rows: Array<[string, unknown]> = [
      ['Cluster', s.cluster],
      ['Version', s.version],
      ['CA pin', s.ca_pin],
      ['Proxies', s.proxies],
      ['Agents', s.agents],
    ];
    process.stdout.write(rows.map(([k, v]) => `${`${k}:`.padEnd(10)}${String(v)}\n`).join(''));
    return 0;
  } catch (err) {
    return fail('status', err);
  }
}

function roleList(text: string): string[] {
  return text
    .split(',')
    .map((r) => r.trim())
    .filter((r) => r !== '');
}

function ttlSeconds(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const ms = parseDuration(text);
  if (ms === undefined) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `--ttl ${text}: expected a duration (12h, 30m, 7d)`);
  return Math.round(ms / 1000);
}

/** Writes an identity file with mode 0600, whole or not at all (a temporary file renamed over it). */
async function writeIdentity(path: string, text: string): Promise<void> {
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, text, { mode: 0o600 });
  await rename(temp, path);
}

export async function usersMain(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === '--help' || verb === '-h' || verb === 'help') {
    process.stdout.write(USERS_USAGE);
    return verb === undefined ? 2 : 0;
  }
  const parsed = parse(rest, USERS_USAGE, {
    roles: { type: 'string' },
    'set-roles': { type: 'string' },
    out: { type: 'string' },
    ttl: { type: 'string' },
  });
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  if (values.help) return help(USERS_USAGE);
  const name = positionals[0];
  try {
    if (verb === 'add') {
      if (name === undefined || positionals.length !== 1) return usageError('gate-mux users add: one NAME', USERS_USAGE);
      if (values.out === undefined) return usageError('gate-mux users add: --out FILE (where its identity is written)', USERS_USAGE);
      const connection = await adminConnection(values as ConnectionFlags);
      // The key is made here and never leaves this machine: the proxy signs its request.
      const { key, csr } = createKeyAndRequest(`user:${name}`, 'ec');
      const ttl = ttlSeconds(values.ttl);
      const answer = await adminCall(connection, 'users/add', {
        name,
        roles: roleList(values.roles ?? ''),
        csr,
        ...(ttl === undefined ? {} : { ttl_seconds: ttl }),
      });
      const issued = answer as unknown as { cert: string; ca: string; expires: string; roles: string[] };
      await writeIdentity(values.out, formatIdentityFile(name, connection.publicAddress, issued, key));
      process.stdout.write(
        `user "${name}" has been created with roles ${issued.roles.join(', ') || '(none)'}; identity written to ${values.out} (valid until ${issued.expires})\n` +
          `use it with: gate-mux get cluster_maintenance_config --proxy ${connection.publicAddress} --identity ${values.out}\n`,
      );
      return 0;
    }
    if (verb === 'update') {
      if (name === undefined || positionals.length !== 1) return usageError('gate-mux users update: one NAME', USERS_USAGE);
      if (values['set-roles'] === undefined) return usageError('gate-mux users update: --set-roles "a,b"', USERS_USAGE);
      const answer = await adminCall(await adminConnection(values as ConnectionFlags), 'users/update', {
        name,
        roles: roleList(values['set-roles']),
      });
      process.stdout.write(`user "${name}" has been updated: roles ${(answer.roles as string[]).join(', ') || '(none)'}\n`);
      return 0;
    }
    if (verb === 'rm') {
      if (name === undefined || positionals.length !== 1) return usageError('gate-mux users rm: one NAME', USERS_USAGE);
      const answer = await adminCall(await adminConnection(values as ConnectionFlags), 'rm', { kind: 'user', name });
      process.stdout.write(`${answer.message as string}\n`);
      return 0;
    }
    if (verb === 'renew') {
      if (values.identity === undefined) return usageError('gate-mux users renew: --identity FILE', USERS_USAGE);
      const connection = await adminConnection(values as ConnectionFlags);
      const current = parseIdentityFile(await readFile(values.identity, 'utf8'));
      const ttl = ttlSeconds(values.ttl);
      const { key, csr } = createKeyAndRequest('user', 'ec');
      const issued = (await adminCall(connection, 'users/renew', {
        csr,
        ...(ttl === undefined ? {} : { ttl_seconds: ttl }),
      })) as unknown as { cert: string; ca: string; expires: string; user: string };
      const out = values.out ?? values.identity;
      await writeIdentity(out, formatIdentityFile(issued.user, current.proxy ?? connection.publicAddress, issued, key));
      process.stdout.write(`identity of user "${issued.user}" renewed in ${out} (valid until ${issued.expires})\n`);
      return 0;
    }
    return usageError(`gate-mux users: unknown subcommand '${verb}'`, USERS_USAGE);
  } catch (err) {
    return fail(`users ${verb}`, err);
  }
}

// Real clients, real proxy: when a route's agent is offline, refuses the target, or the route's
// dial fails, the user's own client prints why, with the code (issue 41). The stock psql,
// mariadb, redis-cli, OpenSSH ssh and curl, and the MongoDB Node driver, each run against the
// YAML-configured GateProxy (directly, and through `gate-mux local-proxy`'s startLocalProxy) and
// their own output is asserted on.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';
import { ErrorCodes } from '../../lib/errors.js';
import { forward } from '../../lib/handlers/builders.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { TunnelRegistry } from '../../lib/tunnel/registry.js';
import { viaTunnel } from '../../lib/tunnel/via-tunnel.js';
import { describeResult, localProxyTo, runClient } from '../helpers/clients.js';
import { startGateProxy, type RunningGateProxy } from '../helpers/gate-proxy.js';
import { spawnAgentProcess } from '../helpers/agent-process.js';
import { readAll, readUntil, refusedPort, tlsClient, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { tempDir } from '../helpers/temp-dir.js';

const AGENT = fileURLToPath(new URL('../../examples/agent.js', import.meta.url));

const psql = requirePeer(t, 'psql', 'postgresql-client');
const mariadb = requirePeer(t, 'mariadb', 'mariadb-client');
const redisCli = requirePeer(t, 'redis-cli', 'redis-tools');
const ssh = requirePeer(t, 'ssh', 'openssh-client');
const curl = requirePeer(t, 'curl', 'curl');

const OFFLINE = `gate: agent "db-1" is offline (${ErrorCodes.AGENT_OFFLINE})`;
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

async function psqlTo(t: Test, conninfo: string): Promise<string> {
  const result = await runClient(psql!, [conninfo, '-Atc', 'select 1'], { env: { ...env, PGCONNECT_TIMEOUT: '10' }, timeoutMs: 20_000 });
  t.not(result.code, 0, 'psql fails');
  return result.stderr;
}

async function mariadbTo(t: Test, port: number, extra: string[] = []): Promise<string> {
  const args = [
    '--no-defaults',
    ...extra,
    '--protocol=TCP',
    '-h',
    '127.0.0.1',
    '-P',
    String(port),
    '-u',
    'root',
    '--connect-timeout=10',
    '-e',
    'select 1',
  ];
  const result = await runClient(mariadb!, args, { env, timeoutMs: 20_000 });
  t.not(result.code, 0, 'mariadb fails');
  return result.stderr;
}

async function redisTo(port: number): Promise<string> {
  const result = await runClient(redisCli!, ['-h', '127.0.0.1', '-p', String(port), 'PING'], { env, timeoutMs: 20_000 });
  return result.stdout.toString() + result.stderr;
}

async function sshTo(t: Test, port: number): Promise<string> {
  const args = [
    '-F',
    'none',
    '-o',
    'BatchMode=yes',
    '-o',
    'StrictHostKeyChecking=no',
    '-o',
    'UserKnownHostsFile=/dev/null',
    '-o',
    'ConnectTimeout=10',
  ];
  const result = await runClient(ssh!, [...args, '-p', String(port), 'nobody@127.0.0.1', 'true'], { env, timeoutMs: 20_000 });
  t.equal(result.code, 255, `ssh fails: ${describeResult(result)}`);
  return result.stderr;
}

async function mongoTo(port: number): Promise<unknown> {
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, {
    serverSelectionTimeoutMS: 3_000,
    connectTimeoutMS: 5_000,
    family: 4,
  });
  try {
    await client.connect();
    await client.db('admin').command({ ping: 1 });
    return undefined;
  } catch (err) {
    return err;
  } finally {
    await client.close(true);
  }
}

/** The message of the server error a driver error carries (itself, or its server's in a selection error). */
function mongoServerError(err: unknown): { name: string; message: string; code: unknown } | undefined {
  const e = err as { name?: string; message?: string; code?: unknown; reason?: { servers?: Map<string, { error?: unknown }> } };
  if (e?.name === 'MongoServerError') return { name: e.name, message: e.message ?? '', code: e.code };
  for (const server of e?.reason?.servers?.values() ?? []) {
    const inner = server.error as { name?: string; message?: string; code?: unknown } | undefined;
    if (inner?.name === 'MongoServerError') return { name: inner.name, message: inner.message ?? '', code: inner.code };
  }
  return undefined;
}

let gate: RunningGateProxy;
let separate: RunningGateProxy;
t.before(async () => {
  const nowhere = `tunnel:db-1/127.0.0.1:${await refusedPort()}`;
  const upstreams = { postgres: nowhere, mysql: nowhere, redis: nowhere, ssh: nowhere, mongodb: nowhere };
  gate = await startGateProxy(t, { mode: 'multiplex', upstreams });
  separate = await startGateProxy(t, { mode: 'separate', upstreams });
});

t.test('agent offline: psql prints the reason and the code, with TLS, without, and through the local proxy', async (t) => {
  if (!psql) return;
  const port = gate.port('multiplex');
  const verified = await psqlTo(t, `host=localhost port=${port} sslmode=verify-full sslrootcert=${gate.caFile} user=u dbname=postgres`);
  t.match(verified, `FATAL:  ${OFFLINE}`, 'sslmode=verify-full on the shared port');
  t.match(verified, 'HINT:  The agent is not connected to the proxy', 'with the hint');
  t.match(await psqlTo(t, `host=127.0.0.1 port=${port} sslmode=disable user=u dbname=postgres`), `FATAL:  ${OFFLINE}`, 'plaintext');
  const local = await localProxyTo(t, gate, 'multiplex', ['gate-postgres']);
  t.match(await psqlTo(t, `host=127.0.0.1 port=${local} sslmode=disable user=u dbname=postgres`), `FATAL:  ${OFFLINE}`, 'local proxy');
  const own = separate.port('postgres');
  t.match(await psqlTo(t, `host=127.0.0.1 port=${own} sslmode=require user=u dbname=postgres`), `FATAL:  ${OFFLINE}`, 'own port, TLS');
  await until(() => (gate.stats('multiplex').failures[ErrorCodes.AGENT_OFFLINE] ?? 0) >= 3, 'the failures counted with their code');
});

t.test('agent offline: mariadb prints the error with the reason, on its own port and through the local proxy', async (t) => {
  if (!mariadb) return;
  const own = separate.port('mysql');
  t.match(await mariadbTo(t, own, ['--skip-ssl']), `ERROR 1152 (HY000): ${OFFLINE}`, 'own port: the ERR packet in place of the greeting');
  // MariaDB 10.11's client asks for TLS by default, and says it could not authenticate the error.
  t.match(await mariadbTo(t, own), `1152 - ${OFFLINE}`, 'own port, with the client asking for TLS');
  const local = await localProxyTo(t, gate, 'multiplex', ['gate-mysql']);
  t.match(await mariadbTo(t, local, ['--skip-ssl']), `ERROR 1152 (HY000): ${OFFLINE}`, 'gate-mysql through the local proxy');
  const ping = await localProxyTo(t, gate, 'multiplex', ['gate-mysql-ping']);
  t.match(await mariadbTo(t, ping, ['--skip-ssl']), `ERROR 1152 (HY000): ${OFFLINE}`, 'gate-mysql-ping: the answer is framed too');
});

t.test('agent offline: redis-cli prints the error reply', async (t) => {
  if (!redisCli) return;
  const local = await localProxyTo(t, gate, 'multiplex', ['gate-redis']);
  t.match(await redisTo(local), `ERR ${OFFLINE}`, 'gate-redis through the local proxy');
  const own = await localProxyTo(t, separate, 'redis', ['gate-redis']);
  t.match(await redisTo(own), `ERR ${OFFLINE}`, 'its own port');
  // No ALPN at all on the Redis port: the route still knows its protocol.
  const bare = await tlsClient(separate.port('redis'), { servername: 'localhost', ca: separate.ca });
  bare.end('PING\r\n');
  t.equal(await readAll(bare), `-ERR ${OFFLINE}\r\n`, 'TLS without ALPN: the RESP error, then the close');
});

t.test('agent offline: OpenSSH prints the disconnect reason', async (t) => {
  if (!ssh) return;
  const port = gate.port('multiplex');
  t.match(
    await sshTo(t, port),
    new RegExp(`Received disconnect from 127\\.0\\.0\\.1 port ${port}:7: ${escapeRegExp(OFFLINE)}`),
    'plaintext SSH on the shared port',
  );
  const local = await localProxyTo(t, gate, 'multiplex', ['gate-proxy-ssh']);
  t.match(
    await sshTo(t, local),
    new RegExp(`Received disconnect from 127\\.0\\.0\\.1 port ${local}:7: ${escapeRegExp(OFFLINE)}`),
    'SSH inside TLS (gate-proxy-ssh) through the local proxy',
  );
  const own = separate.port('ssh');
  t.match(
    await sshTo(t, own),
    new RegExp(`Received disconnect from 127\\.0\\.0\\.1 port ${own}:7: ${escapeRegExp(OFFLINE)}`),
    'its own port',
  );
});

t.test('agent offline: the MongoDB Node driver raises a MongoServerError with the reason', async (t) => {
  const local = await localProxyTo(t, gate, 'multiplex', ['gate-mongodb']);
  const err = await mongoTo(local);
  const server = mongoServerError(err);
  t.ok(server, `a server error: ${String(err)}`);
  t.equal(server?.message, OFFLINE);
  t.equal(server?.code, 6, 'HostUnreachable');
});

t.test('an HTTP route through an offline agent: curl reads 502 with the code, JSON when asked', async (t) => {
  if (!curl) return;
  const registry = new TunnelRegistry({});
  const mux = new Multiplexer({
    routes: [{ name: 'app', match: { protocol: 'http1' }, handler: viaTunnel(registry, 'web-1', '127.0.0.1:80') }],
  });
  const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(async () => {
    await mux.close({ graceMs: 0 });
    registry.close();
  });
  const text = await runClient(curl, ['-sS', '-i', `http://127.0.0.1:${port}/anything`], { env });
  const out = text.stdout.toString();
  t.match(out, /^HTTP\/1\.1 502 Bad Gateway\r\n/, describeResult(text));
  t.match(out, `\r\n\r\ngate: agent "web-1" is offline (${ErrorCodes.AGENT_OFFLINE})\n`);
  const json = await runClient(curl, ['-sS', '-H', 'Accept: application/json', `http://127.0.0.1:${port}/`], { env });
  t.same(JSON.parse(json.stdout.toString()).error.code, ErrorCodes.AGENT_OFFLINE, 'JSON body');
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

t.test('a joined agent that refuses the target, or whose dial is refused: each client says which', async (t) => {
  const refused = `127.0.0.1:${await refusedPort()}`;
  const denied = '127.0.0.1:9'; // not in the agent's allow-list
  const joined = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {
      postgres: `tunnel:db-2/${denied}`,
      ssh: `tunnel:db-2/${denied}`,
      redis: `tunnel:db-2/${refused}`,
      mysql: `tunnel:db-2/${refused}`,
    },
  });
  const port = joined.port('multiplex');
  const token = (await readFile(joined.proxy.devTokenFile!, 'utf8')).trim();
  const state = join(await tempDir(t, 'refusals-agent'), 'db-2');
  const args = ['--proxy', `127.0.0.1:${port}`, '--server-name', 'localhost', '--name', 'db-2', '--state-dir', state, '--allow', refused];
  const agent = spawnAgentProcess(t, AGENT, [...args, '--token', token, '--ca-pin', joined.proxy.caPin], env);
  await readUntil(agent.child.stdout!, () => agent.output().includes('tunnel up'));

  const DENIED = `gate: agent "db-2" refused this route's target (not in its allow-list) (${ErrorCodes.AGENT_TARGET_DENIED})`;
  const REFUSED = `gate: agent "db-2": the target refused the connection (${ErrorCodes.AGENT_STREAM_FAILED}, agent: ${ErrorCodes.DIAL_REFUSED})`;
  if (psql) {
    const stderr = await psqlTo(t, `host=localhost port=${port} sslmode=verify-full sslrootcert=${joined.caFile} user=u dbname=postgres`);
    t.match(stderr, `FATAL:  ${DENIED}`, 'psql: the agent refused the target');
    t.match(stderr, "HINT:  Add the target to the agent's allow-list");
  }
  if (ssh) t.match(await sshTo(t, port), new RegExp(`port ${port}:1: ${escapeRegExp(DENIED)}`), 'ssh: host not allowed, with the reason');
  if (redisCli) {
    const local = await localProxyTo(t, joined, 'multiplex', ['gate-redis']);
    t.match(await redisTo(local), `ERR ${REFUSED}`, "redis-cli: the agent's dial was refused");
  }
  if (mariadb) {
    const local = await localProxyTo(t, joined, 'multiplex', ['gate-mysql']);
    t.match(await mariadbTo(t, local, ['--skip-ssl']), `ERROR 1152 (HY000): ${REFUSED}`, "mariadb: the agent's dial was refused");
  }
  const failures = joined.stats('multiplex').failures;
  t.ok((failures[ErrorCodes.AGENT_TARGET_DENIED] ?? 0) >= 1, 'the denials are counted with their code, as before');
  t.ok((failures[ErrorCodes.AGENT_STREAM_FAILED] ?? 0) >= 1, 'the refused dials too');
});

t.test("a direct upstream that refuses: the proxy's own dial failure is said the same way", async (t) => {
  const refused = `127.0.0.1:${await refusedPort()}`;
  const direct = await startGateProxy(t, { mode: 'multiplex', upstreams: { postgres: refused, ssh: refused, redis: refused } });
  const port = direct.port('multiplex');
  const REFUSED = `gate: the upstream refused the connection (${ErrorCodes.DIAL_REFUSED})`;
  if (psql) {
    // Plaintext: the fast path on bare handles; TLS: the socket after `terminate`.
    t.match(await psqlTo(t, `host=127.0.0.1 port=${port} sslmode=disable user=u dbname=postgres`), `FATAL:  ${REFUSED}`, 'psql, plaintext');
    t.match(
      await psqlTo(t, `host=localhost port=${port} sslmode=verify-full sslrootcert=${direct.caFile} user=u dbname=postgres`),
      `FATAL:  ${REFUSED}`,
      'psql, TLS',
    );
  }
  if (ssh) t.match(await sshTo(t, port), new RegExp(`port ${port}:7: ${escapeRegExp(REFUSED)}`), 'ssh');
  if (redisCli) t.match(await redisTo(await localProxyTo(t, direct, 'multiplex', ['gate-redis'])), `ERR ${REFUSED}`, 'redis-cli');
  if (curl) {
    const mux = new Multiplexer({ routes: [{ name: 'app', match: { protocol: 'http1' }, handler: forward(refused) }] });
    const { port: web } = await mux.listen({ host: '127.0.0.1', port: 0 });
    t.teardown(() => mux.close({ graceMs: 0 }));
    const result = await runClient(curl, ['-sS', '-i', `http://127.0.0.1:${web}/`], { env });
    t.match(
      result.stdout.toString(),
      /^HTTP\/1\.1 502 Bad Gateway\r\n[\s\S]*\r\n\r\ngate: the upstream refused the connection \(GATE_ERR_DIAL_REFUSED\)\n$/,
      'curl',
    );
    await until(() => mux.stats().failures[ErrorCodes.DIAL_REFUSED] === 1, 'counted with the dial code');
  }
  await until(() => (direct.stats('multiplex').failures[ErrorCodes.DIAL_REFUSED] ?? 0) >= 3, 'counted with the dial code');
});

t.test('an agent refused for its version: its clients are told so, not that it is offline', async (t) => {
  // This package's agent (0.x) against a proxy that says it is 3.1.0: more than one major behind.
  const gateOld = await startGateProxy(t, { mode: 'multiplex', version: '3.1.0', upstreams: { postgres: 'tunnel:old-1/127.0.0.1:5432' } });
  const port = gateOld.port('multiplex');
  const state = join(await tempDir(t, 'refusals-old-agent'), 'old-1');
  const refused = once(gateOld.proxy.tunnels, 'agent-refused');
  const args = ['--proxy', `127.0.0.1:${port}`, '--server-name', 'localhost', '--name', 'old-1', '--state-dir', state];
  const old = spawnAgentProcess(
    t,
    AGENT,
    [...args, '--allow', '127.0.0.1:5432', '--token-file', gateOld.proxy.devTokenFile!, '--ca-pin', gateOld.proxy.caPin],
    env,
  );
  const [error] = (await Promise.race([refused, old.exited.then(() => Promise.reject(new Error(old.output())))])) as [{ code: string }];
  t.equal(error.code, ErrorCodes.AGENT_VERSION_INCOMPATIBLE, 'the proxy refused the agent for its version');
  if (!psql) return;
  const stderr = await psqlTo(t, `host=localhost port=${port} sslmode=verify-full sslrootcert=${gateOld.caFile} user=u dbname=postgres`);
  t.match(stderr, `FATAL:  gate: agent "old-1" runs a version the proxy does not admit (${ErrorCodes.AGENT_VERSION_INCOMPATIBLE})`);
  t.match(stderr, 'HINT:  Update the agent to a version the proxy accepts');
});

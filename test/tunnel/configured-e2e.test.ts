// The whole path as users run it, real parts only:
//   psql / ssh / redis-cli -> local proxy (or plaintext SSH) -> YAML-configured GateProxy
//     -> reverse tunnel -> the agent CLI in its own process -> PostgreSQL / sshd / redis-server
// The agent joins with the development token and the CA pin, keeps its identity in a state
// directory, and reaches the proxy through a real tinyproxy that it finds in HTTPS_PROXY *from its
// environment*. Loopback is always dialled directly by the proxy rules, so the agent is given the
// proxy as 0.0.0.0:<port>: Linux connects to 0.0.0.0 on the loopback interface, while the rules do
// not treat it as loopback (as the local-proxy tests do); the certificate is checked for
// `localhost` (--server-name). Then: the agent killed mid-session, restarted without a token, a
// target outside its allow-list, and SIGTERM closing the tunnel with a GOAWAY.
import t from 'tap';
import { once } from 'node:events';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCodes } from '../../lib/errors.js';
import { spawnAgentProcess, type AgentProcess } from '../helpers/agent-process.js';
import { describeResult, localProxyTo, runClient } from '../helpers/clients.js';
import type { Teardownable } from '../helpers/daemon.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { readAll, readUntil, run, tlsClient, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { queryRunning, startPostgres } from '../helpers/postgres.js';
import { startRedis } from '../helpers/redis.js';
import { sshClientArgs, startSshd } from '../helpers/sshd.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

const AGENT = fileURLToPath(new URL('../../examples/agent.js', import.meta.url));

function spawnAgent(t: Teardownable, args: string[], env: NodeJS.ProcessEnv): AgentProcess {
  return spawnAgentProcess(t, AGENT, args, env);
}

t.test('psql, ssh and redis-cli through a configured proxy and a joined agent behind tinyproxy', async (t) => {
  const [pg, sshd, redis, tinyproxy] = [await startPostgres(t), await startSshd(t), await startRedis(t), await startTinyproxy(t)];
  const psql = requirePeer(t, 'psql', 'postgresql-client');
  const ssh = requirePeer(t, 'ssh', 'openssh-client');
  const redisCli = requirePeer(t, 'redis-cli', 'redis-tools');
  if (!pg || !sshd || !redis || !tinyproxy || !psql || !ssh || !redisCli) return;
  const targets = { postgres: `127.0.0.1:${pg.port}`, ssh: `127.0.0.1:${sshd.port}`, redis: `127.0.0.1:${redis.port}` };
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {
      postgres: `tunnel:e2e/${targets.postgres}`,
      ssh: `tunnel:e2e/${targets.ssh}`,
      redis: `tunnel:e2e/${targets.redis}`,
      mysql: 'tunnel:e2e/127.0.0.1:9', // not in the agent's allow-list
    },
  });
  const port = gate.port('multiplex');
  const token = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  const stateDir = join(await tempDir(t, 'agent-state'), 'e2e');
  const env = { PATH: process.env.PATH, HTTPS_PROXY: tinyproxy.url };
  const common = [
    '--proxy',
    `0.0.0.0:${port}`,
    '--server-name',
    'localhost',
    '--name',
    'e2e',
    '--state-dir',
    stateDir,
    '--allow',
    targets.postgres,
    '--allow',
    targets.ssh,
    '--allow',
    targets.redis,
  ];
  const connects = (): number => tinyproxy.output().split(`CONNECT 0.0.0.0:${port}`).length - 1;

  // The CLI's join failures: exit 1 with the code, nothing written.
  const elsewhere = join(await tempDir(t, 'agent-refused'), 'state');
  const refusedArgs = common.map((a) => (a === stateDir ? elsewhere : a));
  for (const [extra, code] of [
    [['--token', token, '--ca-pin', `sha256:${'ab'.repeat(32)}`], ErrorCodes.JOIN_PIN_MISMATCH],
    [['--token', 'not-the-token-0123456789', '--ca-pin', gate.proxy.caPin], ErrorCodes.JOIN_TOKEN_INVALID],
    [[], ErrorCodes.AGENT_STATE],
  ] as Array<[string[], string]>) {
    const refused = spawnAgent(t, [...refusedArgs, ...extra], env);
    const [exitCode] = (await refused.exited) as [number | null];
    t.equal(exitCode, 1, `exit 1 for ${code}`);
    t.match(refused.output(), `agent: ${code}: `, `the CLI names ${code}`);
    if (extra.includes('--token'))
      t.match(refused.output(), 'agent: warning: --token puts the join token on the command line', 'a literal token is warned about');
  }
  await t.rejects(stat(elsewhere), 'no state written by a refused join');

  // As the proxy's printed command has it: the token read from its file, never on the command line.
  let agent = spawnAgent(t, [...common, '--token-file', gate.proxy.devTokenFile!, '--ca-pin', gate.proxy.caPin], env);
  const cmdline = await readFile(`/proc/${agent.child.pid}/cmdline`, 'utf8');
  t.notOk(cmdline.includes(token), 'ps shows no token: the command line names the file');
  await readUntil(agent.child.stdout!, () => agent.output().includes('tunnel up'));
  t.notMatch(agent.output(), /warning: --token/, 'no warning for --token-file');
  t.match(agent.output(), /joined as e2e; identity kept in /);
  t.match(
    agent.output(),
    `tunnel up: agent e2e via ${tinyproxy.url} (connection 1)`,
    'the tunnel went through tinyproxy, from HTTPS_PROXY',
  );
  t.ok(connects() >= 3, 'tinyproxy carried the CA fetch, the join and the tunnel');
  for (const file of ['agent-key.pem', 'agent.pem', 'ca.pem'])
    t.equal((await stat(join(stateDir, file))).mode & 0o777, 0o600, `${file} is 0600`);
  t.notOk(agent.output().includes(token), 'the agent never prints its token');

  const pgPort = await localProxyTo(t, gate, 'multiplex', ['gate-postgres']);
  const query = (sql: string, timeoutMs = 20_000) =>
    run(psql, ['-h', '127.0.0.1', '-p', String(pgPort), '-U', pg.user, '-d', 'postgres', '-Atc', sql], {
      env: { ...process.env, PGSSLMODE: 'disable', PGCONNECT_TIMEOUT: '10' },
      timeoutMs,
    });
  const first = await query("select 'through the agent', 6 * 7");
  t.equal(first.code, 0, first.stderr);
  t.equal(first.stdout.trim(), 'through the agent|42');

  // As the README has it: psql straight at the proxy's port, TLS verified against the cluster CA.
  const direct = await run(
    psql,
    [
      `host=localhost port=${port} sslmode=verify-full sslrootcert=${gate.caFile} user=${pg.user} dbname=postgres`,
      '-Atc',
      "select 'verified'",
    ],
    {
      env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
    },
  );
  t.equal(direct.code, 0, direct.stderr);
  t.equal(direct.stdout.trim(), 'verified', 'psql sslmode=verify-full on the shared port, through the agent');

  const sshResult = await runClient(ssh, [...sshClientArgs(sshd, { port }), 'echo', 'ssh-through-the-agent']);
  t.equal(sshResult.code, 0, describeResult(sshResult));
  t.equal(sshResult.stdout.toString().trim(), 'ssh-through-the-agent', 'plaintext ssh on the shared port, through the tunnel');

  const redisPort = await localProxyTo(t, gate, 'multiplex', ['gate-redis']);
  const redisResult = await run(redisCli, ['-h', '127.0.0.1', '-p', String(redisPort), 'SET', 'tunnelled', 'yes'], { env: process.env });
  t.equal(redisResult.stdout.trim(), 'OK', redisResult.stderr);
  const got = await run(redisCli, ['-h', '127.0.0.1', '-p', String(redisPort), 'GET', 'tunnelled'], { env: process.env });
  t.equal(got.stdout.trim(), 'yes');

  // A target outside the allow-list: refused by the agent, never dialled; the MySQL client is
  // told so in an ERR packet in place of the server's greeting, then the connection closes.
  const denied = await tlsClient(port, { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-mysql'] });
  denied.on('error', () => {});
  t.match(
    await readAll(denied),
    `gate: agent "e2e" refused this route's target (not in its allow-list) (${ErrorCodes.AGENT_TARGET_DENIED})`,
  );
  await until(() => gate.stats('multiplex').failures[ErrorCodes.AGENT_TARGET_DENIED] === 1, 'the refusal recorded');

  // The agent dies mid-session: the session errors (bounded by run's deadline), never hangs.
  const longQuery = query('select pg_sleep(60)', 40_000);
  const sleeping = (): Promise<boolean> => queryRunning(pg, psql, 'select pg_sleep(60)');
  for (let i = 0; i < 100 && !(await sleeping()); i++) await new Promise((resolve) => setTimeout(resolve, 100));
  t.ok(await sleeping(), 'the long query is running in PostgreSQL, through the agent');
  agent.child.kill('SIGKILL');
  await agent.exited;
  const broken = await longQuery;
  t.not(broken.code, 0, 'psql fails once the agent is gone');
  t.match(broken.stderr, /server closed the connection unexpectedly/, 'an error, not a hang');
  t.notMatch(broken.stderr, /failed: /, 'the session was established before the agent died');
  await until(() => !gate.proxy.tunnels.has('e2e'), 'the agent unregistered');
  const offline = await query('select 1');
  t.not(offline.code, 0, 'while the agent is away, psql fails at once');
  await until(() => (gate.stats('multiplex').failures[ErrorCodes.AGENT_OFFLINE] ?? 0) >= 1, 'GATE_ERR_AGENT_OFFLINE recorded');

  // Restarted from the same state directory: no token, no pin.
  agent = spawnAgent(t, common, env);
  await readUntil(agent.child.stdout!, () => agent.output().includes('tunnel up'));
  t.notMatch(agent.output(), /joined as/, 'no new join: the kept identity was reused');
  const after = await query('select 2 + 2');
  t.equal(after.code, 0, after.stderr);
  t.equal(after.stdout.trim(), '4', 'psql works again');

  // SIGTERM: the tunnel closes with a GOAWAY, the process exits 0.
  const gone = once(gate.proxy.tunnels, 'agent-disconnected');
  agent.child.kill('SIGTERM');
  const [code] = (await agent.exited) as [number | null];
  t.equal(code, 0, agent.output());
  t.match(((await gone) as [string, string])[1], /agent sent GOAWAY \(NO_ERROR\)/, 'the proxy saw a GOAWAY, not a reset');
});

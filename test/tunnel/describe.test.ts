// Agents describing themselves to a real proxy side (the multiplexer, the tunnel route, the
// registry) over real TLS and the tunnel framing: what they say reaches the registry and changes follow;
// an incompatible version is refused with its code and words while the agent keeps retrying;
// a hand-made hostile agent's descriptions are refused or sanitised, and what it gets wrong
// after admission never touches its tunnel's other streams.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { readRefusalDebugData } from '../../lib/tunnel/admission.js';
import { startAgent, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { serveAgentStream } from '../../lib/tunnel/agent-stream.js';
import { descriptionLine, type AgentDescription } from '../../lib/tunnel/agent-description.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type GoAwayPayload, StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { packageVersion } from '../../lib/wire/package-version.js';
import { startEchoServer } from '../helpers/echo-servers.js';
import { readUntil, until } from '../helpers/net.js';
import { agentCertificate, rawAgentSession, startProxySide, type ProxySide } from '../helpers/tunnel-rig.js';
import { tunnelDuplex } from '../../lib/tunnel/tunnel-stream.js';

const PROXY_VERSION = '3.1.0';

async function proxySide(t: Test): Promise<ProxySide> {
  const side = await startProxySide([], { registry: { version: PROXY_VERSION, heartbeatTimeoutMs: 5000 } });
  t.teardown(() => side.close());
  return side;
}

function agent(t: Test, side: ProxySide, name: string, extra: Partial<Parameters<typeof startAgent>[0]> = {}): TunnelAgent {
  const a = startAgent({
    proxy: `127.0.0.1:${side.port}`,
    name,
    ...agentCertificate(name),
    ca: devCertificates().ca.cert,
    serverName: 'localhost',
    env: {},
    backoff: { initialMs: 20, maxMs: 100 },
    ...extra,
  });
  t.teardown(() => a.close());
  return a;
}

t.test('a description reaches the registry at admission, and a change follows', async (t) => {
  const side = await proxySide(t);
  const a = agent(t, side, 'db-1', {
    hostname: 'db-1.internal',
    services: [{ kind: 'db', name: 'orders' }],
    version: '3.0.2',
    env: { GATE_EXT_UPGRADER: 'unit' },
  });
  await a.waitConnected(10_000);
  const expected: AgentDescription = {
    serverId: serverIdForName('db-1'),
    hostname: 'db-1.internal',
    services: [{ kind: 'db', name: 'orders' }],
    version: '3.0.2',
    upgrader: 'unit',
    updateGroup: 'default',
  };
  t.same(a.description, expected);
  t.same(side.registry.describedAgent('db-1')?.description, expected, 'the proxy holds it once the agent counts its tunnel up');
  const described = once(side.registry, 'agent-described');
  a.setServices([
    { kind: 'db', name: 'orders' },
    { kind: 'ssh', name: 'db-1' },
  ]);
  t.same(await described, ['db-1']);
  t.same(side.registry.describedAgent('db-1')?.description?.services, [
    { kind: 'db', name: 'orders' },
    { kind: 'ssh', name: 'db-1' },
  ]);
  t.throws(
    () => a.setServices([{ kind: 'printer', name: 'x' }]),
    { code: ErrorCodes.INVALID_ARGUMENT },
    'a kind the proxy would drop is refused here',
  );
  t.throws(
    () => a.setServices(Array.from({ length: 257 }, (_, i) => ({ kind: 'app', name: `a${i}` }))),
    { code: ErrorCodes.INVALID_ARGUMENT },
    'more services than the proxy takes',
  );

  // A proxy without a version of its own to compare (the rule is off) takes the package's 0.1.0.
  const open = await startProxySide([]);
  t.teardown(() => open.close());
  const plain = agent(t, open, 'plain');
  await plain.waitConnected(10_000);
  const d = open.registry.describedAgent('plain')!.description!;
  t.equal(d.upgrader, 'none', 'no GATE_EXT_UPGRADER: none');
  t.equal(d.version, packageVersion, 'the package version by default');
  t.same(d.services, []);
  t.equal(d.serverId, serverIdForName('plain'), 'the server ID derived from the name');
});

t.test('an incompatible version: refused with its code and words, counted, and retried with backoff', async (t) => {
  const side = await proxySide(t);
  const refusals: GateError[] = [];
  const old = agent(t, side, 'old', { version: '1.4.2' });
  old.on('refused', (e: GateError) => refusals.push(e));
  await until(() => refusals.length >= 2, 'two refusals', 10_000);
  t.equal(refusals[0]!.code, ErrorCodes.AGENT_VERSION_INCOMPATIBLE);
  t.equal(refusals[0]!.message, 'the proxy refused the tunnel: proxy 3.1.0 accepts agents 2.x and 3.x; this agent is 1.4.2: upgrade it');
  t.notOk(old.connected, 'never counted up');
  t.equal(old.connections, 0);
  t.notOk(side.registry.has('old'), 'the proxy never registered it');
  t.ok(side.registry.refusals[ErrorCodes.AGENT_VERSION_INCOMPATIBLE]! >= 2, 'counted by code');
  const ahead = agent(t, side, 'ahead', { version: '4.0.0' });
  const [refusal] = (await once(ahead, 'refused')) as [GateError];
  t.match(refusal.message, /proxy 3\.1\.0 accepts agents 2\.x and 3\.x; this agent is 4\.0\.0: upgrade the proxies first/);
  const behind = agent(t, side, 'behind', { version: '2.0.0' });
  await behind.waitConnected(10_000);
  t.equal(side.registry.describedAgent('behind')?.description?.version, '2.0.0', 'one major behind is admitted');
});

/**
 * An agent reduced to what the proxy sees: it answers the describe request with `first` (raw
 * bytes), then serves client streams. Resolves with the session and the describe stream.
 */
async function handMadeAgent(t: Test, side: ProxySide, name: string, first: string | Buffer) {
  const { session, opens } = await rawAgentSession(t, `127.0.0.1:${side.port}`, agentCertificate(name));
  let goaway: Buffer | undefined;
  session.on('goaway', (goAway: GoAwayPayload) => (goaway = Buffer.from(goAway.reason, 'latin1')));
  let describe: FramedStream | undefined;
  opens.on('open', (stream, open) => {
    if (open.kind === StreamKind.DESCRIBE) {
      describe = stream;
      stream.respond({ status: 200, code: '', reason: '' });
      stream.resume();
      stream.write(Buffer.from(first));
      return;
    }
    if (open.kind === StreamKind.CLUSTER_VIEW) {
      stream.respond({ status: 200, code: '', reason: '' });
      stream.resume();
      return void stream.end();
    }
    serveAgentStream(stream, open, { allow: () => true, dialTimeoutMs: 5000, log: { debug() {}, warn() {} } as never, track: () => {} });
  });
  return { session, describe: () => describe, goaway: () => goaway };
}

async function echoThrough(side: ProxySide, name: string, target: string, text: string): Promise<string> {
  const stream = tunnelDuplex(await side.registry.open(name, target));
  stream.on('error', () => {}); // reset if still open when the proxies stop at teardown
  stream.end(text);
  return readUntil(stream, (s) => s.length >= text.length);
}

/** A description line of agent `name`: its own server ID, unless `extra` names another. */
const description = (name: string, extra: Partial<AgentDescription> & Record<string, unknown> = {}) =>
  descriptionLine({
    serverId: serverIdForName(name),
    hostname: 'h',
    services: [],
    version: '3.1.0',
    upgrader: 'none',
    ...extra,
  } as AgentDescription);

t.test('hostile descriptions: refused with the code before admission, sanitised when only untidy', async (t) => {
  const side = await proxySide(t);
  const refused = async (name: string, first: string | Buffer, why: RegExp, what: string) => {
    const agent = await handMadeAgent(t, side, name, first);
    await until(() => agent.goaway() !== undefined, `${what}: the GOAWAY`, 10_000);
    const refusal = readRefusalDebugData(agent.goaway());
    t.equal(refusal?.code, ErrorCodes.AGENT_DESCRIPTION_INVALID, what);
    t.match(refusal?.message, why, what);
    t.notOk(side.registry.has(name), `${what}: not registered`);
  };
  await refused('huge', Buffer.alloc(20_000, 0x61), /more than 16384 bytes/, 'a line of 20 kB without a newline');
  await refused('malformed', '{"serverId":\n', /not JSON/, 'malformed JSON');
  await refused('notsemver', description('notsemver', { version: '3.1' }), /not semver/, 'a version that is not semver');
  t.equal(side.registry.refusals[ErrorCodes.AGENT_DESCRIPTION_INVALID], 3, 'each refusal counted');

  const untidy = await handMadeAgent(t, side, 'untidy', description('untidy', { hostname: 'web\r\n\u001b[31mroot\u0000' }));
  await side.registry.waitFor('untidy', 10_000);
  t.equal(side.registry.describedAgent('untidy')?.description?.hostname, 'web[31mroot', 'control characters removed');
  t.equal(untidy.goaway(), undefined, 'admitted');
});

t.test('a bad description after admission resets only the describe stream: CONNECTs go on, the last good one stays', async (t) => {
  const side = await proxySide(t);
  const echo = await startEchoServer(t);
  const agent = await handMadeAgent(t, side, 'changing', description('changing', { hostname: 'first' }));
  await side.registry.waitFor('changing', 10_000);
  t.equal(await echoThrough(side, 'changing', echo.address, 'before'), 'before');
  const describe = agent.describe()!;
  const reset = new Promise((resolve) => describe.once('close', resolve));
  describe.write(Buffer.from(description('changing', { hostname: 'second' })));
  await until(() => side.registry.describedAgent('changing')?.description?.hostname === 'second', 'the change', 5000);
  describe.write(Buffer.from(description('changing', { version: '3.2.0' })));
  await reset;
  t.equal(describe.closeCode, WireError.REFUSED_STREAM, 'REFUSED_STREAM: a running agent cannot change its version');
  t.equal(side.registry.describedAgent('changing')?.description?.hostname, 'second', 'the last valid description stays');
  t.equal(await echoThrough(side, 'changing', echo.address, 'after'), 'after', "the tunnel's other streams are unaffected");
  t.ok(side.registry.has('changing'));
});

t.test('an agent that never answers the describe request is ended at the admission deadline', async (t) => {
  const side = await startProxySide([], { registry: { version: PROXY_VERSION, heartbeatTimeoutMs: 300 } });
  t.teardown(() => side.close());
  // A session that takes streams and never answers them.
  const { socket } = await rawAgentSession(t, `127.0.0.1:${side.port}`, agentCertificate('mute'));
  await once(socket, 'close');
  t.notOk(side.registry.has('mute'), 'never registered');
});

t.test('the describe stream, open for the tunnel’s life, does not hold up a graceful close', async (t) => {
  // With no client stream open, an agent's close finishes at once, not when the grace runs out
  // (an hour here: the race below would lose). A GOAWAY from the proxy ends the stream too.
  const side = await proxySide(t);
  const a = agent(t, side, 'db-close', { version: '3.0.2' });
  await a.waitConnected(10_000);
  t.ok(side.registry.describedAgent('db-close'), 'admitted, so its describe stream is open');
  const hour = 3_600_000;
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    a.close({ graceMs: hour }).then(() => 'closed'),
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve('still waiting after 20 s'), 20_000);
    }),
  ]);
  clearTimeout(timer);
  t.equal(outcome, 'closed', 'the close finished without waiting for the describe stream');
  t.equal(a.state, 'closed');
  await until(() => side.registry.agents().length === 0, 'the proxy saw the tunnel go');
});

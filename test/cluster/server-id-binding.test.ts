// An agent speaks only for itself (issue 37): server IDs are predictable (serverIdForName) and
// /v1/inventory lists them, so an agent describing itself with another agent's server ID once
// replaced that agent's inventory row, and took it away when it left. Now the ID is bound to the
// agent's certificate name: such a description is refused with GATE_ERR_AGENT_SERVER_ID_MISMATCH
// and logged, and the other agent's row stays. A real proxy side (multiplexer, tunnel route,
// registry), a ClusterMember writing to a MemoryRouteStore, a real agent B, and a hand-made agent
// A (its framed session answered by the test) over real TLS on loopback.
import t, { type Test } from 'tap';
import { ClusterMember } from '../../lib/cluster/cluster-member.js';
import { readInventory } from '../../lib/cluster/inventory.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { ErrorCodes } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { readRefusalDebugData } from '../../lib/tunnel/admission.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { type AgentDescription, descriptionLine } from '../../lib/tunnel/agent-description.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type GoAwayPayload, StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { packageVersion } from '../../lib/wire/package-version.js';
import { captureLogs } from '../hardening/log-capture.js';
import { until } from '../helpers/net.js';
import { agentCertificate, type ProxySide, rawAgentSession, startProxySide } from '../helpers/tunnel-rig.js';

const B_ID = serverIdForName('agent-b');

function line(serverId: string, hostname: string): string {
  const d: AgentDescription = {
    serverId,
    hostname,
    services: [{ kind: 'ssh', name: hostname }],
    version: packageVersion,
    upgrader: 'unit',
    updateGroup: 'default',
  };
  return descriptionLine(d);
}

/** Agent A reduced to its session: its describe stream answered with `first`; the stream, and the GOAWAY's reason. */
async function handMadeAgent(t: Test, side: ProxySide, name: string, first: string) {
  const { socket, session, opens } = await rawAgentSession(t, `127.0.0.1:${side.port}`, agentCertificate(name));
  let goaway: Buffer | undefined;
  session.on('goaway', (goAway: GoAwayPayload) => (goaway = Buffer.from(goAway.reason, 'latin1')));
  let describe: FramedStream | undefined;
  opens.on('open', (stream, open) => {
    stream.respond({ status: 200, code: '', reason: '' });
    stream.resume();
    if (open.kind !== StreamKind.DESCRIBE) return void stream.end();
    describe = stream;
    stream.write(Buffer.from(first));
  });
  return { socket, session, describe: () => describe, goaway: () => goaway };
}

async function rig(t: Test) {
  const logs = captureLogs();
  const side = await startProxySide([], { registry: { logger: logs.logger } });
  t.teardown(() => side.close());
  const store = new MemoryRouteStore();
  const member = new ClusterMember({
    store,
    registry: side.registry,
    presence: { id: 'p1', peerAddr: '', version: packageVersion, channelFingerprint: 'sha256:x' },
    ttlMs: 30_000,
  });
  t.teardown(() => member.close());
  await member.start();
  const b = startAgent({
    proxy: `127.0.0.1:${side.port}`,
    name: 'agent-b',
    ...agentCertificate('agent-b'),
    ca: devCertificates().ca.cert,
    serverName: 'localhost',
    env: { GATE_EXT_UPGRADER: 'unit' },
    hostname: 'b-host',
    services: [{ kind: 'ssh', name: 'b-host' }],
  });
  t.teardown(() => b.close());
  await b.waitConnected(10_000);
  const bRow = async () => (await readInventory(store)).find((r) => r.server_id === B_ID);
  await until(async () => (await bRow())?.hostname === 'b-host', "B's row in the inventory", 10_000);
  return { side, store, logs, bRow };
}

t.test("an agent describing itself with another's server ID is refused with the code, logged, and the other's row stays", async (t) => {
  const { side, store, logs, bRow } = await rig(t);
  const a = await handMadeAgent(t, side, 'agent-a', line(B_ID, 'evil'));
  await until(() => a.goaway() !== undefined, 'the GOAWAY', 10_000);
  const refusal = readRefusalDebugData(a.goaway()!);
  t.equal(refusal?.code, ErrorCodes.AGENT_SERVER_ID_MISMATCH, 'refused with GATE_ERR_AGENT_SERVER_ID_MISMATCH');
  t.match(refusal?.message, /is not agent agent-a's/);
  t.notOk(side.registry.has('agent-a'), 'never admitted');
  t.equal(side.registry.refusals[ErrorCodes.AGENT_SERVER_ID_MISMATCH], 1, 'counted by code');
  t.ok(
    logs.lines.some((l) => l.code === ErrorCodes.AGENT_SERVER_ID_MISMATCH && l.agent === 'agent-a'),
    'logged with the code and the agent',
  );
  t.match(await bRow(), { agent: 'agent-b', hostname: 'b-host', upgrader: 'unit', proxies: ['p1'] }, "B's row is intact");
  t.equal((await readInventory(store)).length, 1, 'and A has none');

  // A leaves: nothing of B's goes with it.
  a.session.destroy();
  a.socket.destroy();
  await until(() => a.socket.closed, 'A gone');
  t.match(await bRow(), { agent: 'agent-b', hostname: 'b-host' }, "B's row is still there after A left");
});

t.test(
  "an admitted agent that later names another's server ID: that line is refused, both rows stay, and its leaving removes only its own",
  async (t) => {
    const { side, store, bRow } = await rig(t);
    const a = await handMadeAgent(t, side, 'agent-a', line(serverIdForName('agent-a'), 'a-host'));
    await side.registry.waitFor('agent-a', 10_000);
    await until(async () => (await readInventory(store)).length === 2, "A's own row", 10_000);
    const describe = a.describe()!;
    const refused = new Promise((resolve) => describe.once('close', resolve));
    describe.write(Buffer.from(line(B_ID, 'evil')));
    await refused;
    t.equal(describe.closeCode, WireError.REFUSED_STREAM, 'the describe stream is refused (REFUSED_STREAM); the tunnel goes on');
    t.ok(side.registry.has('agent-a'), 'A keeps its tunnel');
    t.equal(side.registry.describedAgent('agent-a')?.description?.hostname, 'a-host', "A's last valid description stays");
    t.match(await bRow(), { agent: 'agent-b', hostname: 'b-host' }, "B's row is intact");

    a.session.destroy();
    a.socket.destroy();
    await until(async () => (await readInventory(store)).length === 1, "A's row removed once A left", 10_000);
    t.match(await bRow(), { agent: 'agent-b', hostname: 'b-host' }, "B's row is still there");
  },
);

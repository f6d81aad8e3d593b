// Proxies whose clients go through an agent's tunnel, and an agent reduced to its framed session
// that the test answers itself: for what the proxies do before, while and after an agent answers a
// client's stream (the client's first bytes, a client leaving, an answer that never comes).
import { PeerPool } from '../../lib/cluster/peer-pool.js';
import { PeerServer } from '../../lib/cluster/peer-server.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { descriptionLine } from '../../lib/tunnel/agent-description.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { tunnelRoute } from '../../lib/tunnel/endpoint.js';
import { TunnelRegistry, type TunnelRegistryOptions } from '../../lib/tunnel/registry.js';
import { viaTunnel, type ViaTunnelOptions } from '../../lib/tunnel/via-tunnel.js';
import type { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type OpenPayload, StreamKind } from '../../lib/tunnel-framing/frames.js';
import { ALPN_PEER_FRAMED, PEER_ROLE_URI } from '../../lib/wire/names.js';
import { packageVersion } from '../../lib/wire/package-version.js';
import type { Teardownable } from './daemon.js';
import { until } from './net.js';
import { agentCertificate, rawAgentSession } from './tunnel-rig.js';

const { ca, server } = devCertificates();

/** A proxy whose TLS clients offering ALPN gate-bench (passed through) and HTTP/1 clients go to `target` via agent `agent`. */
export async function proxyViaAgent(
  t: Teardownable,
  agent: string,
  target: string,
  options: { registry?: TunnelRegistryOptions; via?: ViaTunnelOptions } = {},
): Promise<{ port: number; registry: TunnelRegistry; mux: Multiplexer }> {
  const registry = new TunnelRegistry(options.registry ?? {});
  const mux = new Multiplexer({
    routes: [
      tunnelRoute(registry, { cert: server.cert, key: server.key, ca: ca.cert }),
      { name: 'tls-via-agent', match: { alpn: 'gate-bench', protocol: 'tls' }, handler: viaTunnel(registry, agent, target, options.via) },
      { name: 'http-via-agent', match: { protocol: 'http1' }, handler: viaTunnel(registry, agent, target, options.via) },
    ],
  });
  const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(async () => {
    const closed = mux.close({ graceMs: 0 });
    registry.close();
    await closed;
  });
  return { port, registry, mux };
}

/**
 * A peered route in one process: a holder proxy (its registry holds the agents' tunnels, its
 * PeerServer serves forwarded dials on a peering listener) and a front proxy whose TLS (ALPN
 * gate-bench) and HTTP/1 clients go to `target` via `agent` through the holder (a PeerPool).
 */
export async function peeredProxies(
  t: Teardownable,
  agent: string,
  target: string,
): Promise<{ holderPort: number; registry: TunnelRegistry; peering: PeerServer; pool: PeerPool; front: Multiplexer; frontPort: number }> {
  const proxyPair = (): { cert: string; key: string } => ca.issue({ commonName: 'proxy', uris: [PEER_ROLE_URI], usage: 'both' });
  const registry = new TunnelRegistry({});
  const peering = new PeerServer({ registry });
  const holder = new Multiplexer({
    routes: [
      tunnelRoute(registry, { cert: server.cert, key: server.key, ca: ca.cert }),
      { name: 'peer', match: { alpn: ALPN_PEER_FRAMED, protocol: 'tls' }, handler: peering.endpoint({ ...proxyPair(), ca: ca.cert }) },
    ],
  });
  const { port: holderPort } = await holder.listen({ host: '127.0.0.1', port: 0 });
  const frontPair = proxyPair();
  const pool = new PeerPool({ identity: () => ({ ...frontPair, ca: ca.cert }) });
  const peer = { id: 'holder', peerAddr: `127.0.0.1:${holderPort}` };
  const handler = viaTunnel(new TunnelRegistry({}), agent, target, { open: (name, to, o) => pool.open(peer, name, to, o) });
  const front = new Multiplexer({
    routes: [
      { name: 'tls-via-peer', match: { alpn: 'gate-bench', protocol: 'tls' }, handler },
      { name: 'http-via-peer', match: { protocol: 'http1' }, handler },
    ],
  });
  const { port: frontPort } = await front.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(async () => {
    const closed = Promise.all([front.close({ graceMs: 0 }), holder.close({ graceMs: 0 })]);
    pool.destroy();
    peering.destroy();
    registry.close();
    await closed;
  });
  return { holderPort, registry, peering, pool, front, frontPort };
}

/**
 * An agent reduced to its session, registered (it answers the proxy's describe request): the
 * test answers its client streams itself. `nextConnect` is the next one, with its OPEN.
 */
export async function handMadeAgent(
  t: Teardownable,
  port: number,
  registry: TunnelRegistry,
  name: string,
): Promise<{ session: FramedSession; nextConnect: () => Promise<[FramedStream, OpenPayload]> }> {
  const { session, opens } = await rawAgentSession(t, `127.0.0.1:${port}`, agentCertificate(name));
  const waiting: Array<(s: [FramedStream, OpenPayload]) => void> = [];
  opens.on('open', (stream, open) => {
    if (open.kind === StreamKind.DESCRIBE) {
      stream.respond({ status: 200, code: '', reason: '' });
      stream.write(
        Buffer.from(
          descriptionLine({
            serverId: serverIdForName(name),
            hostname: 'h',
            services: [],
            version: packageVersion,
            upgrader: 'none',
            updateGroup: 'default',
          }),
        ),
      );
      stream.resume();
      return;
    }
    if (open.kind !== StreamKind.CONNECT) {
      stream.respond({ status: 200, code: '', reason: '' });
      stream.resume();
      return void stream.end();
    }
    waiting.shift()?.([stream, open]);
  });
  await until(() => registry.has(name), `${name} registered`);
  return { session, nextConnect: () => new Promise((resolve) => waiting.push(resolve)) };
}

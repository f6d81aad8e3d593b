// A cluster of GateProxy instances in one process for the peering tests: one data_dir (so one
// cluster CA), one route store, each proxy with its peer listener; real agents from that CA; TLS
// clients of the shared port, optionally behind a PROXY v2 header.
import { once } from 'node:events';
import { connect as tcpConnect } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { RouteStore } from '../../lib/cluster/route-store.js';
import type { Logger } from '../../lib/log.js';
import type { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { encodeProxyHeaderV2 } from '../../lib/proxy-protocol/header.js';
import { startAgent, type AgentOptions, type TunnelAgent } from '../../lib/tunnel/agent.js';
import type { Teardownable } from './daemon.js';
import { clusterAuthority } from './cluster.js';
import { startEchoServer } from './echo-servers.js';
import { startGateProxy, type RunningGateProxy } from './gate-proxy.js';
import { tempDir } from './temp-dir.js';

export interface Cluster {
  /** The cluster CA (known once the first proxy started). */
  readonly ca: CertificateAuthority;
  /** A TCP echo server the agents serve: `mongodb` routes reach it through agent `edge`, `redis` through `ghost` (never connected). */
  echo: string;
  start(extra?: { proxyService?: Record<string, unknown>; upstreams?: Record<string, string>; logger?: Logger }): Promise<RunningGateProxy>;
  /** Agent `edge` with a tunnel to `proxy`, connected. */
  agent(proxy: RunningGateProxy, extra?: Partial<AgentOptions>): Promise<TunnelAgent>;
}

export async function startCluster(t: Teardownable, store: RouteStore): Promise<Cluster> {
  const dataDir = await tempDir(t, 'cluster-data');
  const echo = (await startEchoServer(t)).address;
  let ca: CertificateAuthority | undefined;
  return {
    get ca() {
      if (!ca) throw new Error('start a proxy first: it makes the cluster CA');
      return ca;
    },
    echo,
    start: async (extra = {}) => {
      const proxy = await startGateProxy(t, {
        mode: 'multiplex',
        upstreams: { mongodb: `tunnel:edge/${echo}`, redis: `tunnel:ghost/${echo}`, ...extra.upstreams },
        proxyService: { peer_listen_addr: '127.0.0.1:0', ...extra.proxyService },
        cluster: { presence_ttl: '3s' },
        routeStore: store,
        dataDir,
        ...(extra.logger ? { logger: extra.logger } : {}),
      });
      ca ??= await clusterAuthority(dataDir);
      return proxy;
    },
    agent: async (proxy, extra = {}) => {
      const agent = startAgent({
        proxy: proxy.address('multiplex'),
        name: 'edge',
        ...ca!.issue({ commonName: 'edge', usage: 'client' }),
        ca: ca!.cert,
        serverName: 'localhost',
        resources: [echo],
        env: {},
        backoff: { initialMs: 50, maxMs: 400 },
        ...extra,
      });
      t.teardown(() => agent.stop());
      await agent.waitConnected(10_000);
      return agent;
    },
  };
}

/** A TLS client of `proxy`'s shared port with `alpn`, optionally behind a PROXY v2 header from `source`. */
export async function clusterClient(
  proxy: RunningGateProxy,
  ca: string,
  alpn: string,
  source?: { address: string; port: number },
): Promise<TLSSocket> {
  const port = proxy.port('multiplex');
  const raw = tcpConnect({ host: '127.0.0.1', port });
  await once(raw, 'connect');
  if (source) raw.write(encodeProxyHeaderV2({ ...source, family: 'IPv4' }, { address: '127.0.0.1', port, family: 'IPv4' }));
  const socket = tlsConnect({ socket: raw, servername: 'localhost', ca, ALPNProtocols: [alpn] });
  socket.on('error', () => {});
  await once(socket, 'secureConnect');
  return socket;
}

/** Writes to a client whose dial should fail: true when it is closed without any answer. */
export async function closedWithoutAnswer(socket: TLSSocket): Promise<boolean> {
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString()));
  socket.write('anyone?');
  await once(socket, 'close');
  return got === '';
}

import { CertificateAuthority, Multiplexer, TunnelRegistry, tunnelRoute, viaTunnel, terminate, startAgent } from 'gate-mux';

// One CA for the proxy's certificate and the agent's (an agent normally gets its own by joining).
const ca = CertificateAuthority.create();
const proxyPair = ca.issue({ commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
const agentPair = ca.issue({ commonName: 'db-agent', usage: 'client' });
const database = process.env.TARGET ?? '127.0.0.1:5432';

// Proxy side: agents arrive with the tunnel's ALPN and a client certificate from `ca`;
// clients asking for gate-postgres are carried through db-agent's tunnel to the database.
const registry = new TunnelRegistry();
const mux = new Multiplexer({
  routes: [
    tunnelRoute(registry, { ...proxyPair, ca: ca.cert }),
    { name: 'postgres', match: { alpn: 'gate-postgres' }, handler: terminate(proxyPair, viaTunnel(registry, 'db-agent', database)) },
  ],
});
const { port } = await mux.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 8443) });

// Agent side, in the database's network: it dials out (no inbound port) and reaches only `resources`.
// `resources` lists what it may dial; or allow: (target) => boolean; default: deny all else.
const agent = startAgent({ proxy: `localhost:${port}`, name: 'db-agent', ...agentPair, ca: ca.cert, resources: [database] });
agent.on('connected', ({ via, connections }) => console.log(`tunnel up via ${via} (connection ${connections})`));
await agent.waitConnected();
console.log(`listening on port ${port}; a TLS client with ALPN gate-postgres reaches ${database} through the agent`);
process.once('SIGINT', () => void agent.close({ graceMs: 1000 }).then(() => mux.close({ graceMs: 1000 })));

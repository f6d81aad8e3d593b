import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { startAgent, type AgentOptions, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { joinProxy } from '../../lib/tunnel/join-client.js';
import type { Teardownable } from './daemon.js';
import type { RunningGateProxy } from './gate-proxy.js';

/** The cluster CA the first proxy made in `dataDir` (shared by every proxy of the cluster), able to issue. */
export async function clusterAuthority(dataDir: string): Promise<CertificateAuthority> {
  const [cert, key] = await Promise.all(['ca.pem', 'ca-key.pem'].map((file) => readFile(join(dataDir, file), 'utf8')));
  return CertificateAuthority.fromPem({ cert: cert!, key: key! });
}

/**
 * Joins agent `name` to a GateProxy with its development token (once) and returns the options that
 * start it on the shared port with `resources` allowed; `connect` starts one (stopped at teardown).
 */
export async function joinedAgent(
  t: Teardownable,
  gate: RunningGateProxy,
  name: string,
  resources: string[],
): Promise<{ options: AgentOptions; connect(): Promise<TunnelAgent> }> {
  const token = (await readFile(gate.proxy.devTokenFile, 'utf8')).trim();
  const endpoint = { proxy: gate.address('multiplex'), serverName: 'localhost', env: {} };
  const identity = await joinProxy(endpoint, { token, name, caPin: gate.proxy.caPin });
  const options: AgentOptions = {
    proxy: endpoint.proxy,
    name,
    ...identity,
    serverName: 'localhost',
    env: {},
    resources,
    backoff: { initialMs: 50, maxMs: 400 },
  };
  return {
    options,
    connect: async () => {
      const agent = startAgent(options);
      t.teardown(() => agent.stop());
      await agent.waitConnected();
      return agent;
    },
  };
}

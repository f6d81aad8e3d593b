import { readFile } from 'node:fs/promises';
import { startAgent, type AgentOptions, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { joinProxy } from '../../lib/tunnel/join-client.js';
import type { Teardownable } from './daemon.js';
import type { RunningGateProxy } from './gate-proxy.js';

/**
 * Polls a condition, sync or async, until it holds (bounded): cluster members refresh on their own
 * timers, and their timers are unref'd, so awaiting one of their events could let a test's event
 * loop empty. A condition that throws counts as not yet.
 */
export async function eventually(condition: () => boolean | Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const start = Date.now();
  while (!(await Promise.resolve().then(condition).catch(() => false))) {
    if (Date.now() - start > limitMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Joins agent `name` to a GateProxy with its development token (once) and returns the options that
 * start it on the shared port with `resources` allowed; `connect` starts one (stopped at teardown).
 */
export async function joinedAgent(t: Teardownable, gate: RunningGateProxy, name: string, resources: string[]): Promise<{ options: AgentOptions; connect(): Promise<TunnelAgent> }> {
  const token = (await readFile(gate.proxy.devTokenFile, 'utf8')).trim();
  const endpoint = { proxy: gate.address('multiplex'), serverName: 'localhost', env: {} };
  const identity = await joinProxy(endpoint, { token, name, caPin: gate.proxy.caPin });
  const options: AgentOptions = { proxy: endpoint.proxy, name, ...identity, serverName: 'localhost', env: {}, resources, backoff: { initialMs: 50, maxMs: 400 } };
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

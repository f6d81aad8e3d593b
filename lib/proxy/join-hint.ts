import { formatAddress, isWildcardHost, type HostPort } from '../config/address.js';
import { isAgentUpstream, UPSTREAM_PROTOCOLS, type GateConfig } from '../config/types.js';
import type { ListenerPlan } from './listener-plan.js';

export interface JoinHintOptions {
  config: GateConfig;
  /** The running listeners (bound ports). */
  plan: ListenerPlan;
  /** `sha256:<hex>` of the cluster CA's SubjectPublicKeyInfo. */
  caPin: string;
  /**
   * The development token's file; the command names it (`--token-file`), so the token itself is
   * never printed. Undefined when the development token is off: the command then takes one of
   * the configured tokens from the agent's environment (`GATE_JOIN_TOKEN`).
   */
  tokenFile: string | undefined;
  /** How to run the agent (default: the repository's example). */
  agentCommand?: string;
}

/** Agents the configuration routes to, each with the targets it must allow. */
export function agentsInConfig(config: GateConfig): Map<string, string[]> {
  const agents = new Map<string, string[]>();
  for (const protocol of UPSTREAM_PROTOCOLS) {
    const upstream = config.proxy.upstreams[protocol];
    if (!upstream || !isAgentUpstream(upstream)) continue;
    const targets = agents.get(upstream.agent) ?? [];
    if (!targets.includes(upstream.target)) targets.push(upstream.target);
    agents.set(upstream.agent, targets);
  }
  return agents;
}

/** Where an agent reaches a listener: a wildcard bind is shown as `localhost`. */
function reachable(address: HostPort): string {
  return formatAddress(isWildcardHost(address.host) ? { host: 'localhost', port: address.port } : address);
}

/** Single-quotes a shell word unless it is plainly safe. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * What `npm start` prints for agents: the CA pin, and for each agent the configuration routes to a
 * ready-to-paste command with its `--allow` list (or one template when none is configured). The
 * agent reads the token from its file (`--token-file`), so it never appears in the output, in
 * terminal scroll-back, in a log collector reading stdout, nor in the agent's command line, which
 * `ps` shows to every local user. The proxy address is the first
 * public_addr, else the web listener (port as bound); in separate mode the tunnel port is added.
 */
export function agentJoinHint(options: JoinHintOptions): string {
  const { config, plan } = options;
  const web = plan.listeners[0];
  const webPort = web?.port ?? config.proxy.webListenAddr.port;
  const firstPublic = config.proxy.publicAddrs[0];
  const proxy = firstPublic ? formatAddress(firstPublic) : reachable({ host: web?.host ?? config.proxy.webListenAddr.host, port: webPort });
  const tunnelListener = plan.listeners.find((l) => l.name === 'tunnel');
  const tunnelPublic = config.proxy.tunnelPublicAddrs[0];
  const tunnel =
    plan.mode === 'separate' && tunnelListener ? (tunnelPublic ? formatAddress(tunnelPublic) : reachable(tunnelListener)) : undefined;
  const agents = agentsInConfig(config);
  const entries = agents.size > 0 ? [...agents] : [['my-agent', ['HOST:PORT']] as [string, string[]]];
  const command = options.agentCommand ?? 'node dist/examples/agent.js';
  const lines = [`agents: CA pin ${options.caPin}`];
  lines.push(
    agents.size > 0
      ? 'start each agent the configuration routes to (in the network of its targets):'
      : 'start an agent (no upstream is tunnel:<agent>/<host:port> yet):',
  );
  for (const [name, targets] of entries) {
    const words = [
      command,
      '--proxy',
      shellWord(proxy),
      ...(tunnel ? ['--tunnel-addr', shellWord(tunnel)] : []),
      '--ca-pin',
      options.caPin,
      ...(options.tokenFile === undefined ? [] : ['--token-file', shellWord(options.tokenFile)]),
      '--name',
      shellWord(name),
      ...targets.flatMap((target) => ['--allow', shellWord(target)]),
      '--state-dir',
      shellWord(`.agent-${name}`),
    ];
    lines.push(`  ${words.join(' ')}`);
  }
  lines.push(
    options.tokenFile === undefined
      ? 'the development token is off (auth_service.development_token): set GATE_JOIN_TOKEN to one of auth_service.join_tokens'
      : `the development token is in ${options.tokenFile} (any agent name, no expiry; turn it off with auth_service.development_token: false)`,
  );
  return lines.join('\n');
}

import { ErrorCodes, GateError } from '../errors.js';
import { parseVersion as parseSemVer, type SemVer } from '../vocabulary/semver.js';

/** The version as semver, or undefined when it is not one (`1.2.3`, `1.2.3-rc.1+b`; no leading `v`). */
export function parseVersion(text: string): SemVer | undefined {
  if (text.length > 64 || text !== text.trim() || text.startsWith('v')) return undefined;
  try {
    return parseSemVer(text);
  } catch {
    return undefined;
  }
}

/**
 * The one compatibility rule between an agent and the proxy it tunnels to (the platform's): the
 * agent's major version is the proxy's, or one below it; never above it. Only majors count:
 * within a major, versions are compatible both ways (semver's promise), so an agent a minor or
 * a patch ahead is admitted; pre-release and build parts are ignored, so 3.0.0-rc.1 is a 3.
 * Major 0 is a major like any other: a 0.x proxy accepts 0.x agents, a 1.x proxy 0.x and 1.x.
 * Returns GATE_ERR_AGENT_VERSION_INCOMPATIBLE with the words an operator acts on, or undefined
 * when the agent is admitted. A proxy whose own version is not semver (a development build)
 * cannot apply the rule and admits every version. Pure.
 */
export function versionRefusal(proxyVersion: string, agentVersion: string): GateError | undefined {
  const proxy = parseVersion(proxyVersion);
  const agent = parseVersion(agentVersion);
  if (!proxy) return undefined;
  if (!agent)
    return new GateError(
      ErrorCodes.AGENT_VERSION_INCOMPATIBLE,
      `the agent's version ${JSON.stringify(agentVersion.slice(0, 64))} is not semver: proxy ${proxyVersion} cannot tell whether it works with it`,
    );
  if (agent.major === proxy.major || agent.major === proxy.major - 1) return undefined;
  const accepts = proxy.major === 0 ? 'agents 0.x' : `agents ${proxy.major - 1}.x and ${proxy.major}.x`;
  const action = agent.major > proxy.major ? 'upgrade the proxies first, or install an older agent' : 'upgrade it';
  return new GateError(
    ErrorCodes.AGENT_VERSION_INCOMPATIBLE,
    `proxy ${proxyVersion} accepts ${accepts}; this agent is ${agentVersion}: ${action}`,
  );
}

import type { Agent as HttpAgent } from 'node:http';
import { ProxyAgent, type ProxyAgentOptions } from 'proxy-agent';
import { proxyForTarget, type ProxyRule } from './resolve-proxy.js';

export interface ProxyAgentForOptions {
  /** Environment to take the proxy variables from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Which variable applies (default `by-scheme`; `dial-back` for requests to the platform's proxy). */
  proxyRule?: ProxyRule;
  /** CA for the target (and for an `https://` proxy: proxy-agent hands its options to both). */
  ca?: string | Buffer | Array<string | Buffer>;
  rejectUnauthorized?: boolean;
  keepAlive?: boolean;
  /** Agents for direct requests (default: new ones with the options above). */
  httpAgent?: HttpAgent;
  httpsAgent?: HttpAgent;
}

/**
 * The proxy URL proxy-agent should use for `url`, from our resolver: '' means direct. Exposed so
 * callers and tests can see the decision without a request. proxy-agent's own default
 * (proxy-from-env) matches NO_PROXY differently (no CIDR, no `*.domain`), so the answer is
 * resolved once, here, and handed over: raw dials and HTTP requests never disagree.
 */
export function proxyUrlFor(url: string, env: NodeJS.ProcessEnv = process.env, rule: ProxyRule = 'by-scheme'): string {
  return proxyForTarget(url, env, rule)?.toUrlWithCredentials() ?? '';
}

/**
 * An http(s) Agent (proxy-agent 8) that routes each request as `dial` would: same variables, same
 * NO_PROXY rules, same loopback exemption. A malformed proxy variable fails the request with
 * GATE_ERR_PROXY_ENV_INVALID. Call `destroy()` when done with it.
 */
export function proxyAgentFor(options: ProxyAgentForOptions = {}): ProxyAgent {
  const env = options.env ?? process.env;
  const agentOptions: ProxyAgentOptions = {
    getProxyForUrl: (url: string) => proxyUrlFor(url, env, options.proxyRule),
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    ...(options.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: options.rejectUnauthorized }),
    ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
    ...(options.httpAgent === undefined ? {} : { httpAgent: options.httpAgent }),
    ...(options.httpsAgent === undefined ? {} : { httpsAgent: options.httpsAgent }),
  };
  return new ProxyAgent(agentOptions);
}

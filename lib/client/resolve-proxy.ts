import { readProxyEnv, type EnvValue } from './env-proxy.js';
import { isLoopbackHost, noProxyMatches, parseNoProxy } from './no-proxy.js';
import { parseProxyUrl, type ProxyConfig } from './proxy-config.js';
import { parseTarget } from './target.js';

/**
 * Which variable a request's proxy comes from. `by-scheme`: the target's own kind decides (below).
 * `dial-back`: HTTPS_PROXY, else HTTP_PROXY, whatever the URL's scheme — the platform's rule for
 * services that dial back to its proxy, which joining, renewal, the updater and the tunnel all
 * follow, so an environment with only HTTP_PROXY carries all of them or none.
 */
export type ProxyRule = 'by-scheme' | 'dial-back';

/**
 * The proxy to use for `target` (`host:port`, `[v6]:port` or an http(s) URL) under `env`, or
 * undefined to dial directly. This one answer drives raw dials, TLS dials and the HTTP agent, so
 * they agree on every NO_PROXY entry.
 *
 * Which variable applies:
 * - a raw `host:port` dial (reverse tunnel, local proxy): HTTPS_PROXY, else HTTP_PROXY — what
 *   the platform's Go code does by asking httpproxy for an https:// then an http:// URL;
 * - an `https://` URL: HTTPS_PROXY only; an `http://` URL: HTTP_PROXY only (httpproxy
 *   proxyForURL picks by the request's scheme and never falls back), unless `rule` is
 *   `dial-back`: then a URL is treated as the raw dial it makes to the platform's proxy.
 *
 * A malformed proxy value throws GATE_ERR_PROXY_ENV_INVALID whatever the target, so a typo shows
 * up on the first dial instead of only on the dials NO_PROXY happens not to cover.
 * GATE_ERR_TARGET_INVALID when the target does not parse.
 */
export function proxyForTarget(
  target: string,
  env: NodeJS.ProcessEnv = process.env,
  rule: ProxyRule = 'by-scheme',
): ProxyConfig | undefined {
  const { host, port, scheme } = parseTarget(target);
  const vars = readProxyEnv(env);
  let chosen: EnvValue | undefined;
  if (rule === 'dial-back') chosen = vars.httpsProxy ?? vars.httpProxy;
  else if (scheme === 'https') chosen = vars.httpsProxy;
  else if (scheme === 'http') chosen = vars.httpProxy;
  else chosen = vars.httpsProxy ?? vars.httpProxy;
  if (!chosen) return undefined;
  const proxy = parseProxyUrl(chosen.value, chosen.name);
  if (isLoopbackHost(host)) return undefined;
  if (noProxyMatches(parseNoProxy(vars.noProxy?.value), host, port)) return undefined;
  return proxy;
}

/** One proxy-related environment variable that is set: which spelling, and its value. */
export interface EnvValue {
  name: string;
  value: string;
}

/** The proxy variables of an environment, each already reduced to the spelling that wins. */
export interface ProxyEnv {
  httpsProxy: EnvValue | undefined;
  httpProxy: EnvValue | undefined;
  noProxy: EnvValue | undefined;
}

/**
 * The first non-empty of the given spellings. Upper case is listed first, so it wins; an empty
 * upper-case value counts as unset and the lower-case one is used. This is exactly Go's
 * golang.org/x/net/http/httpproxy `getEnvAny` ("if val := os.Getenv(n); val != \"\" { return val }"),
 * which `FromEnvironment` calls as getEnvAny("HTTPS_PROXY", "https_proxy") and so on.
 */
export function firstNonEmpty(env: NodeJS.ProcessEnv, ...names: string[]): EnvValue | undefined {
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && value !== '') return { name, value };
  }
  return undefined;
}

/** Reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY (or their lower-case spellings). */
export function readProxyEnv(env: NodeJS.ProcessEnv = process.env): ProxyEnv {
  return {
    httpsProxy: firstNonEmpty(env, 'HTTPS_PROXY', 'https_proxy'),
    httpProxy: firstNonEmpty(env, 'HTTP_PROXY', 'http_proxy'),
    noProxy: firstNonEmpty(env, 'NO_PROXY', 'no_proxy'),
  };
}

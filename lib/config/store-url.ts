import type { StoreConfig } from './types.js';

/** Redis's own port, when a `redis://` URL names none. */
export const DEFAULT_REDIS_PORT = 6379;

export type StoreUrlResult = { ok: true; store: StoreConfig } | { ok: false; reason: string };

/**
 * `cluster.store`: `memory`, or `redis://[[user]:password@]host[:port][/db]` / `rediss://…` (TLS),
 * the URL form every Redis client reads (IANA's redis and rediss URI schemes). The password never
 * appears in a reason or the label: configuration errors are printed and logged.
 */
export function parseStoreUrl(text: string): StoreUrlResult {
  const trimmed = text.trim();
  if (trimmed === 'memory') return { ok: true, store: { kind: 'memory' } };
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    return { ok: false, reason: 'not a URL' };
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
    return { ok: false, reason: `scheme "${url.protocol}" is neither redis: nor rediss:` };
  if (url.hostname === '') return { ok: false, reason: 'no host' };
  if (url.search !== '' || url.hash !== '') return { ok: false, reason: 'a query or fragment is not read; use the cluster keys instead' };
  const port = url.port === '' ? DEFAULT_REDIS_PORT : Number(url.port);
  if (port === 0) return { ok: false, reason: 'port 0 cannot be dialled' };
  const path = url.pathname.replace(/^\//, '');
  if (path !== '' && !/^(0|[1-9][0-9]{0,4})$/.test(path))
    return { ok: false, reason: `the path must be a database number such as /0, got "/${path}"` };
  const db = path === '' ? 0 : Number(path);
  const username = url.username === '' ? undefined : decodeURIComponent(url.username);
  const password = url.password === '' ? undefined : decodeURIComponent(url.password);
  const hidden = new URL(url.href);
  if (password !== undefined) hidden.password = '***';
  // IPv6 hosts keep their brackets in `hostname`; ioredis wants them bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return {
    ok: true,
    store: { kind: 'redis', tls: url.protocol === 'rediss:', host, port, username, password, db, label: hidden.href.replace(/\/$/, '') },
  };
}

import { isIP } from 'node:net';
import { CONNECTION_UPGRADE_PATH, UPGRADE_PROTOCOL_ALPN, UPGRADE_PROTOCOL_ALPN_PING } from '../wire/names.js';

/** The parts of an HTTP/1.1 request the connection upgrade looks at (Node's IncomingMessage has them). */
export interface UpgradeRequestHead {
  method?: string | undefined;
  url?: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

export type UpgradeProtocol = typeof UPGRADE_PROTOCOL_ALPN | typeof UPGRADE_PROTOCOL_ALPN_PING;

export type UpgradeCheck = { ok: true; protocol: UpgradeProtocol } | { ok: false; status: number; message: string };

/** RFC 6455 §4.1: the key is 16 random bytes, base64: 22 characters and '=='. */
const KEY = /^[+/0-9A-Za-z]{22}==$/;

function header(head: UpgradeRequestHead, name: string): string | undefined {
  const value = head.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

function tokens(value: string | undefined): string[] {
  return value === undefined
    ? []
    : value
        .split(',')
        .map((t) => t.trim().toLowerCase())
        .filter((t) => t !== '');
}

/** Whether a request is for the connection-upgrade path (with or without a query string). */
export function isConnectionUpgradePath(url: string | undefined): boolean {
  if (url === undefined) return false;
  const q = url.indexOf('?');
  return (q < 0 ? url : url.slice(0, q)) === CONNECTION_UPGRADE_PATH;
}

/**
 * Checks a connection-upgrade request before anything is set up for it (pure): `GET`,
 * `Upgrade: websocket`, `Connection: Upgrade`, a well-formed `Sec-WebSocket-Key`, version 13, and
 * a `Sec-WebSocket-Protocol` naming `alpn` or `alpn-ping` (the first of the two the client
 * lists). Anything else is answered with the status given and no WebSocket.
 */
export function checkUpgradeRequest(head: UpgradeRequestHead): UpgradeCheck {
  if (head.method !== 'GET')
    return { ok: false, status: 405, message: `method ${head.method ?? '(none)'}: the connection upgrade is a GET` };
  if (!tokens(header(head, 'upgrade')).includes('websocket')) return { ok: false, status: 400, message: 'no "Upgrade: websocket" header' };
  if (!tokens(header(head, 'connection')).includes('upgrade'))
    return { ok: false, status: 400, message: 'no "Connection: Upgrade" header' };
  const key = header(head, 'sec-websocket-key');
  if (key === undefined) return { ok: false, status: 400, message: 'no Sec-WebSocket-Key header' };
  if (!KEY.test(key.trim())) return { ok: false, status: 400, message: 'Sec-WebSocket-Key is not 16 bytes of base64' };
  const version = header(head, 'sec-websocket-version');
  if (version?.trim() !== '13')
    return { ok: false, status: 426, message: `Sec-WebSocket-Version ${version ?? '(none)'}: only 13 is spoken` };
  const offered = tokens(header(head, 'sec-websocket-protocol'));
  const protocol = offered.find((p): p is UpgradeProtocol => p === UPGRADE_PROTOCOL_ALPN || p === UPGRADE_PROTOCOL_ALPN_PING);
  if (protocol === undefined) {
    return {
      ok: false,
      status: 400,
      message: `Sec-WebSocket-Protocol ${offered.length === 0 ? '(none)' : JSON.stringify(offered.join(', '))}: expected ${UPGRADE_PROTOCOL_ALPN} or ${UPGRADE_PROTOCOL_ALPN_PING}`,
    };
  }
  return { ok: true, protocol };
}

export type ForwardedFor = { ok: true; address: string } | { ok: false; message: string };

/**
 * The client's address from `X-Forwarded-For`, as a trusted load balancer sets it: exactly one
 * IP address. Several (a client that sent its own header, which the balancer appended to: which
 * one is real cannot be told), none, or something that is not an address is refused. Node joins
 * repeated headers with ', ', so they count as several too.
 */
export function forwardedFor(value: string | string[] | undefined): ForwardedFor {
  const joined = Array.isArray(value) ? value.join(',') : value;
  if (joined === undefined || joined.trim() === '') return { ok: false, message: 'no X-Forwarded-For from a trusted load balancer' };
  const parts = joined.split(',').map((p) => p.trim());
  if (parts.length !== 1) return { ok: false, message: `X-Forwarded-For names ${parts.length} addresses; exactly one is accepted` };
  let address = parts[0]!;
  // A bracketed IPv6 address, as some balancers write it.
  if (address.startsWith('[') && address.endsWith(']')) address = address.slice(1, -1);
  if (isIP(address) === 0) return { ok: false, message: `X-Forwarded-For ${JSON.stringify(parts[0]!.slice(0, 64))} is not an IP address` };
  return { ok: true, address };
}

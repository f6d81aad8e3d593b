import { isIP } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { ErrorCodes, GateError, isGateError } from '../errors.js';
import { componentLogger } from '../log.js';
import { dial, DEFAULT_DIAL_TIMEOUT_MS, type DialOptions } from './dial.js';
import type { ProxyConfig } from './proxy-config.js';
import { formatHostPort, parseTarget } from './target.js';
import { openUpgrade } from '../conn-upgrade/upgrade-client.js';
import { TLS_ROUTING_UPGRADE_ENV } from '../wire/names.js';
import { forcedUpgrade, upgradeDecisions } from './upgrade-decision.js';
import { pathEndsTls } from './upgrade-probe.js';

export interface DialTlsOptions extends DialOptions {
  /** SNI and the name the certificate is checked against (default: the target host unless it is an IP). */
  serverName?: string;
  /** ALPN protocols to offer, in preference order. */
  alpn: string[];
  /** Fail with GATE_ERR_ALPN_MISMATCH unless the server selected one of `alpn`. */
  requireAlpn?: boolean;
  ca?: string | Buffer | Array<string | Buffer>;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Default true. */
  rejectUnauthorized?: boolean;
  /** Replaces the host-name check (Node's `checkServerIdentity`), for a peer known by a role rather than a name. */
  checkServerIdentity?: ConnectionOptions['checkServerIdentity'];
  /** Deadline for the TLS handshake after the dial (default: `timeoutMs`, else 10 s). */
  handshakeTimeoutMs?: number;
  /** TLS routing through a load balancer that ends TLS: whether and how (default: detected). */
  connectionUpgrade?: ConnectionUpgradeDial;
}

/**
 * TLS routing through a load balancer that ends TLS itself (an L7 balancer strips SNI, ALPN and
 * client certificates): the TLS handshake then runs inside a WebSocket connection upgrade
 * (`GET /webapi/connectionupgrade`) through the balancer, and the proxy routes it as if it had
 * arrived on its port.
 */
export interface ConnectionUpgradeDial {
  /**
   * `'auto'` (the default): as GATE_TLS_ROUTING_UPGRADE says, else detected (see dialTls): after
   * a direct handshake that failed as a balancer makes it fail, a test handshake offering
   * `probeAlpn` that comes back with no ALPN, an ALPN not offered, or a `no_application_protocol`
   * alert means the path ends TLS; a successful upgrade is remembered per address for ten
   * minutes. `true` / `false`: always / never, whatever the environment says.
   */
  mode?: boolean | 'auto';
  /**
   * What the test handshake offers (default the dial's `alpn`). A web ALPN (`http/1.1`) cannot
   * tell: a balancer that ends TLS answers it itself, so a caller that dials the web port for
   * the sake of another route (an agent joining) offers that route's ALPN.
   */
  probeAlpn?: string[];
  /**
   * Trust for the load balancer's own certificate (default: the system store and
   * NODE_EXTRA_CA_CERTS, as any HTTPS client). The TLS inside the upgrade is still checked
   * against the dial's `ca`. With `rejectUnauthorized: false` neither is checked.
   */
  loadBalancerCa?: string | Buffer | Array<string | Buffer>;
}

export interface DialTlsResult {
  socket: TLSSocket;
  via: ProxyConfig | undefined;
  /** The ALPN protocol the server selected, or undefined when it selected none. */
  alpn: string | undefined;
  /** True when the TLS runs inside a connection upgrade through a load balancer that ends TLS. */
  upgraded: boolean;
}

/**
 * `dial` then TLS on the resulting stream (`tls.connect({socket})`), with the platform's ALPN.
 * The multiplexer routes on SNI and ALPN, so a server that ignored our ALPN has put us on a
 * route we did not ask for: with `requireAlpn` that is GATE_ERR_ALPN_MISMATCH, not a
 * connection that later fails with confusing protocol errors.
 *
 * Through a load balancer that ends TLS (`connectionUpgrade`, 'auto' by default), the TLS goes
 * inside a WebSocket connection upgrade. Detected without changing anything for a path that
 * works: the direct handshake comes first, and only when it fails as a balancer would make it
 * fail (its certificate not from our CA, no ALPN or the wrong one) does a test handshake ask
 * whether the path ends TLS; if it does and the upgrade then succeeds, upgrading is remembered for
 * the address (ten minutes, forgotten at the first failure that could mean the path changed).
 * When the upgrade fails too, the direct attempt's error is the one thrown.
 */
export async function dialTls(target: string, options: DialTlsOptions): Promise<DialTlsResult> {
  const handshakeMs = options.handshakeTimeoutMs ?? options.timeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
  const asked = options.connectionUpgrade?.mode ?? 'auto';
  const forced = asked !== 'auto' ? asked : forcedUpgrade((options.env ?? process.env)[TLS_ROUTING_UPGRADE_ENV], target);
  if (forced !== undefined) return connectTls(target, options, forced, handshakeMs);
  if (upgradeDecisions.get(target) === true) {
    try {
      return await connectTls(target, options, true, handshakeMs);
    } catch (err) {
      // The balancer may be gone: the next tries start from the direct handshake again.
      if (!isGateError(err) || !PATH_MAY_HAVE_CHANGED.has(err.code)) throw err;
      upgradeDecisions.forget(target);
    }
  }
  try {
    return await connectTls(target, options, false, handshakeMs);
  } catch (err) {
    if (!isGateError(err) || !LOOKS_LIKE_A_BALANCER.has(err.code) || options.signal?.aborted) throw err;
    const offered = options.connectionUpgrade?.probeAlpn ?? options.alpn;
    if (!(await pathEndsTls(target, { ...options, alpn: offered, handshakeTimeoutMs: handshakeMs }))) throw err;
    const log = componentLogger(options.logger, 'dialer');
    try {
      const upgraded = await connectTls(target, options, true, handshakeMs);
      upgradeDecisions.set(target, true);
      log.info({ target, offered }, 'the path to the proxy ends TLS (a load balancer): TLS routing goes through the connection upgrade');
      return upgraded;
    } catch (upgradeError) {
      log.debug({ target, err: upgradeError }, "the connection upgrade failed too; reporting the direct handshake's failure");
      throw err;
    }
  }
}

/** Failures of a direct handshake that a load balancer ending TLS causes (its certificate, its ALPN). */
const LOOKS_LIKE_A_BALANCER = new Set<string>([ErrorCodes.TLS_HANDSHAKE, ErrorCodes.ALPN_MISMATCH]);
const PATH_MAY_HAVE_CHANGED = new Set<string>([ErrorCodes.TLS_HANDSHAKE, ErrorCodes.ALPN_MISMATCH, ErrorCodes.CONN_UPGRADE_REFUSED]);

async function connectTls(target: string, options: DialTlsOptions, upgraded: boolean, handshakeMs: number): Promise<DialTlsResult> {
  const { host } = parseTarget(target);
  const log = componentLogger(options.logger, 'dialer');
  const servername = options.serverName ?? (isIP(host) === 0 ? host : undefined);
  const { socket: raw, via } = await dial(target, options);
  const route = `${target}${via ? ` via ${via.display}` : ' (direct)'}${upgraded ? ' (connection upgrade)' : ''}`;
  const carrier = upgraded
    ? await openUpgrade(raw, {
        authority: formatHostPort(host, parseTarget(target).port),
        servername: isIP(host) === 0 ? host : undefined,
        ...(options.connectionUpgrade?.loadBalancerCa === undefined ? {} : { ca: options.connectionUpgrade.loadBalancerCa }),
        rejectUnauthorized: options.rejectUnauthorized ?? true,
        timeoutMs: handshakeMs,
        ...(options.signal ? { signal: options.signal } : {}),
      })
    : raw;
  const socket = tlsConnect({
    socket: carrier,
    ...(servername === undefined ? {} : { servername }),
    ALPNProtocols: options.alpn,
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    ...(options.cert === undefined ? {} : { cert: options.cert }),
    ...(options.key === undefined ? {} : { key: options.key }),
    rejectUnauthorized: options.rejectUnauthorized ?? true,
    ...(options.checkServerIdentity === undefined ? {} : { checkServerIdentity: options.checkServerIdentity }),
  });
  await new Promise<void>((resolve, reject) => {
    const done = (err?: Error): void => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.removeListener('secureConnect', onSecure);
      socket.removeListener('error', onError);
      if (err) {
        socket.destroy();
        carrier.destroy();
        raw.destroy();
        reject(err);
      } else resolve();
    };
    const onSecure = (): void => done();
    const onError = (err: Error): void =>
      done(new GateError(ErrorCodes.TLS_HANDSHAKE, `TLS to ${route} failed: ${err.message}`, { cause: err }));
    const onAbort = (): void => done(new GateError(ErrorCodes.DIAL_ABORTED, `TLS to ${route} aborted`, { cause: options.signal?.reason }));
    const timer = setTimeout(
      () => done(new GateError(ErrorCodes.TLS_HANDSHAKE_TIMEOUT, `TLS to ${route} timed out after ${handshakeMs} ms`)),
      handshakeMs,
    );
    socket.once('secureConnect', onSecure);
    socket.once('error', onError);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
  });
  const alpn = socket.alpnProtocol || undefined;
  if (options.requireAlpn && (alpn === undefined || !options.alpn.includes(alpn))) {
    socket.destroy();
    throw new GateError(
      ErrorCodes.ALPN_MISMATCH,
      `TLS to ${route}: server selected ${alpn === undefined ? 'no ALPN protocol' : JSON.stringify(alpn)}, offered ${options.alpn.join(', ')}`,
    );
  }
  log.debug({ target, via: via?.display ?? 'direct', alpn, upgraded }, 'TLS established');
  return { socket, via, alpn, upgraded };
}

import { createServer, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { PingFramedStream } from '../length-prefix/ping-stream.js';
import type { GateError } from '../errors.js';
import { type Closable, type CloseOptions, closeEvent, Lifecycle, type LifecycleState, within } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { isPingAlpn } from '../wire/names.js';
import { dialTls, type ConnectionUpgradeDial } from './dial-tls.js';
import { dial } from './dial.js';
import { dialThenRelay } from '../transport/dial-then-relay.js';
import { openUpgrade } from '../conn-upgrade/upgrade-client.js';
import { formatHostPort, parseTarget } from './target.js';
import { isIP } from 'node:net';
import type { ProxyConfig } from './proxy-config.js';

export interface LocalProxyOptions {
  /** Where stock clients connect (plain TCP). Port 0 picks a free one. */
  listen: { host: string; port: number };
  /** The multiplexer, `host:port`. */
  target: string;
  /**
   * ALPN of the protocol carried (e.g. `gate-postgres`); the server must select one of these. When
   * it selects a `-ping` variant (`gate-redis-ping`), the tunnel speaks its framing (uint32
   * length + payload, empty frames as keep-alives) so the stock client still sees a plain stream.
   */
  alpn: string[];
  serverName?: string;
  ca?: string | Buffer | Array<string | Buffer>;
  /** Skip certificate verification (development only). */
  insecure?: boolean;
  cert?: string | Buffer;
  key?: string | Buffer;
  env?: NodeJS.ProcessEnv;
  /** Override the environment proxy (null: direct). */
  proxy?: ProxyConfig | null;
  dialTimeoutMs?: number;
  /** Through a load balancer that ends TLS (detected by default): see dialTls. */
  connectionUpgrade?: ConnectionUpgradeDial;
  /**
   * Carry each client's bytes unchanged inside a connection upgrade, for clients that speak TLS
   * to the proxy themselves (kubectl with the `kube-gate-proxy-alpn.` server name, whose TLS is
   * passed through to the Kubernetes API) and only need a load balancer that ends TLS crossed.
   * No TLS is added here, so `alpn`, `ca`, `cert` and `key` are not used; the balancer's
   * certificate is checked as `connectionUpgrade.loadBalancerCa` (default the system store) says.
   */
  passthrough?: boolean;
  logger?: Logger;
}

/** What carries one client's bytes to the multiplexer, and how it got there. */
type Carrier = { socket: Duplex; via: ProxyConfig | undefined; alpn: string | undefined };

export interface LocalProxy extends Closable {
  address(): AddressInfo;
  /** open, closing (close() called, connections finishing), closed. */
  readonly state: LifecycleState;
  /**
   * Stops accepting; open connections get `graceMs` (default 0) to end, then what is left (open
   * tunnels, pending dials) is destroyed. Resolves when the listener is closed; a second call
   * returns the same promise.
   */
  close(options?: CloseOptions): Promise<void>;
  /** Stops accepting and destroys every open tunnel and pending dial now. */
  destroy(err?: GateError): void;
}

/**
 * A plain-TCP listener that carries each accepted connection to the multiplexer inside TLS with
 * the protocol's ALPN, through the environment proxy (the way `tsh proxy db` lets psql reach a
 * database through the one port). Each direction is piped on its own: pipe() pauses a fast
 * writer for a slow reader, and one side's end only ends the other's writable side (half-close);
 * an error on either side destroys both and is logged once with the byte counts.
 */
export async function startLocalProxy(options: LocalProxyOptions): Promise<LocalProxy> {
  const log = componentLogger(options.logger, 'local-proxy');
  const open = new Set<Duplex>();
  const pending = new Set<AbortController>();
  let nextId = 1;

  const server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, (client) => {
    const id = nextId++;
    open.add(client);
    const abort = new AbortController();
    pending.add(abort);
    let logged = false;
    const logOnce = (err: Error, what: string, extra: Record<string, unknown> = {}): void => {
      if (logged) return;
      logged = true;
      log.warn({ id, err, code: (err as { code?: unknown }).code, ...extra }, what);
    };
    // Until the tunnel exists, a client error is logged and a close just cancels the dial.
    const onEarlyError = (err: Error): void => logOnce(err, 'client failed before the tunnel was up');
    client.on('error', onEarlyError);
    client.once('close', () => open.delete(client));

    void dialThenRelay<Carrier>(client, {
      abort,
      dial: (cancel) => (options.passthrough ? carryUnchanged(options, cancel.signal) : dialWithTls(options, cancel.signal)),
      release: ({ socket: upstream }) => {
        client.removeListener('error', onEarlyError);
        upstream.destroy();
      },
      fail: (err) => {
        logOnce(err as Error, 'tunnel dial failed');
        client.destroy();
      },
      relay: ({ socket: upstream, via, alpn }) => {
        client.removeListener('error', onEarlyError);
        log.debug({ id, via: via?.display ?? 'direct', alpn }, 'tunnel open');
        // The proxy frames a `-ping` ALPN's stream (lib/wire/names.ts); unwrap it here, as it does there.
        tunnel(client, isPingAlpn(alpn) ? new PingFramedStream(upstream) : upstream, open, logOnce);
      },
    }).finally(() => {
      pending.delete(abort);
      // A dial aborted by close(): its client goes too.
      if (abort.signal.aborted && !client.destroyed) client.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listen.port, options.listen.host, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.error({ err }, 'listener error'));
  log.info({ listen: server.address(), target: options.target, alpn: options.alpn }, 'local proxy listening');

  const lifecycle = new Lifecycle();
  const release = (): void => {
    for (const abort of pending) abort.abort(new Error('local proxy closing'));
    for (const socket of open) socket.destroy();
  };
  return {
    address: () => server.address() as AddressInfo,
    get state() {
      return lifecycle.state;
    },
    close: (closeOptions: CloseOptions = {}) =>
      lifecycle.close(async () => {
        const listenerClosed = new Promise<void>((resolve) => server.close(() => resolve()));
        const graceMs = closeOptions.graceMs ?? 0;
        if (graceMs > 0 && open.size > 0) await within(Promise.all([...open].map((socket) => closeEvent(socket))), graceMs);
        release();
        await listenerClosed;
      }),
    destroy: () => {
      if (!lifecycle.destroy()) return;
      server.close();
      release();
    },
  };
}

/** The client's bytes inside TLS with the protocol's ALPN, through the environment proxy or an upgrade as configured. */
function dialWithTls(options: LocalProxyOptions, signal: AbortSignal): Promise<Carrier> {
  return dialTls(options.target, {
    alpn: options.alpn,
    requireAlpn: true,
    ...(options.serverName === undefined ? {} : { serverName: options.serverName }),
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    ...(options.cert === undefined ? {} : { cert: options.cert }),
    ...(options.key === undefined ? {} : { key: options.key }),
    rejectUnauthorized: !options.insecure,
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.proxy === undefined ? {} : { proxy: options.proxy }),
    ...(options.dialTimeoutMs === undefined ? {} : { timeoutMs: options.dialTimeoutMs }),
    ...(options.connectionUpgrade === undefined ? {} : { connectionUpgrade: options.connectionUpgrade }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    allowHalfOpen: true,
    signal,
  });
}

/** passthrough: the upgrade alone, through the environment proxy like any dial; its stream carries the client's bytes. */
async function carryUnchanged(
  options: LocalProxyOptions,
  signal: AbortSignal,
): Promise<{ socket: Duplex; via: ProxyConfig | undefined; alpn: undefined }> {
  const { host, port } = parseTarget(options.target);
  const timeoutMs = options.dialTimeoutMs ?? 10_000;
  const { socket: raw, via } = await dial(options.target, {
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.proxy === undefined ? {} : { proxy: options.proxy }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    timeoutMs,
    signal,
  });
  const socket = await openUpgrade(raw, {
    authority: formatHostPort(host, port),
    servername: isIP(host) === 0 ? host : undefined,
    ...(options.connectionUpgrade?.loadBalancerCa === undefined ? {} : { ca: options.connectionUpgrade.loadBalancerCa }),
    rejectUnauthorized: !options.insecure,
    timeoutMs,
    signal,
  });
  return { socket, via, alpn: undefined };
}

function tunnel(
  client: Socket,
  upstream: Duplex,
  open: Set<Duplex>,
  logOnce: (err: Error, what: string, extra?: Record<string, unknown>) => void,
): void {
  open.add(upstream);
  upstream.once('close', () => open.delete(upstream));
  let up = 0;
  let down = 0;
  client.on('data', (chunk: Buffer) => (up += chunk.length));
  upstream.on('data', (chunk: Buffer) => (down += chunk.length));
  const onError = (side: string) => (err: Error) => {
    logOnce(err, `tunnel ${side} failed`, { bytesUp: up, bytesDown: down });
    client.destroy();
    upstream.destroy();
  };
  client.on('error', onError('client'));
  upstream.on('error', onError('upstream'));
  // Once both directions have ended, or either side is gone, tear down the other.
  client.once('close', () => upstream.destroy());
  upstream.once('close', () => client.destroy());
  client.pipe(upstream);
  upstream.pipe(client);
  client.resume();
}

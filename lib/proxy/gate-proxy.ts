import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createSecureServer, createServer as createH2cServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { createSecureContext, type SecureContext, type Server as TlsServer } from 'node:tls';
import { componentLogger, type Logger } from '../log.js';
import { Multiplexer } from '../mux/multiplexer.js';
import type { StatsSnapshot } from '../mux/stats.js';
import { fetchText as fetchThroughEnvironment } from '../client/fetch-text.js';
import type { GateConfig } from '../config/types.js';
import { buildPing } from '../web/ping.js';
import { createWebRoutes, type WebRequestHandler } from '../web/routes.js';
import { VersionChannels, type FetchText } from '../web/version-channels.js';
import { loadProxyCertificates, type ProxyCertificates } from './certificates.js';
import { planListeners, type ListenerPlan, type ListenerSpec } from './listener-plan.js';
import { routeFor, type WebServers } from './route-handlers.js';
import { caPin } from '../pki/ca-pin.js';
import { AgentAuthority } from '../tunnel/agent-authority.js';
import { DEV_TOKEN_FILE, loadDevToken } from '../tunnel/dev-token.js';
import { join } from 'node:path';
import { createJoinRoutes } from '../tunnel/join-endpoint.js';
import { JoinTokens } from '../tunnel/join-tokens.js';
import { TunnelRegistry } from '../tunnel/registry.js';

export interface GateProxyOptions {
  config: GateConfig;
  /** The proxy's own version (ping's server_version, the `default` channel). */
  version: string;
  logger?: Logger;
  /** How forwarded channels are fetched; default: through HTTPS_PROXY/NO_PROXY with the dialer. */
  fetchText?: FetchText;
  /** HTTPS_PROXY / NO_PROXY for the upstream dials that honour them (Kubernetes); default `process.env`, read at each (re)load. */
  env?: NodeJS.ProcessEnv;
}

interface RunningListener {
  spec: ListenerSpec;
  mux: Multiplexer;
  port: number;
}

const defaultFetch: FetchText = (url, { timeoutMs }) => fetchThroughEnvironment(url, { timeoutMs });

function listenerKey(spec: ListenerSpec): string {
  return `${spec.name} ${spec.host}:${spec.port}`;
}

/**
 * The platform's proxy front door: the configured listeners (one shared TLS-routing port, or the
 * legacy separate ports), the web endpoints served in-process (ping, version channels), and the
 * other protocols forwarded to their upstreams. `reload` swaps configuration and certificates
 * without dropping established connections.
 */
export class GateProxy {
  private config: GateConfig;
  private certificates!: ProxyCertificates;
  private channels!: VersionChannels;
  private webRoutes!: WebRequestHandler;
  private listeners: RunningListener[] = [];
  private readonly web: WebServers;
  private readonly logger: Logger;
  private secureContext!: SecureContext;
  private sniContexts = new Map<string, SecureContext>();
  private readonly registry: TunnelRegistry;
  private readonly joinTokens = new JoinTokens();
  private authority!: AgentAuthority;
  private revoked = new Set<string>();
  private devTokenPath!: string;

  private constructor(private readonly options: GateProxyOptions) {
    this.config = options.config;
    this.logger = componentLogger(options.logger, 'proxy');
    this.registry = new TunnelRegistry({
      ...(options.logger ? { logger: options.logger } : {}),
      isRevoked: (serial) => this.revoked.has(serial),
    });
    const joinRoutes = createJoinRoutes(
      () => this.authority,
      () => this.certificates.clusterCa.cert,
      options.logger,
    );
    const onRequest = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void => {
      if (joinRoutes(req as IncomingMessage, res as ServerResponse)) return;
      if (this.webRoutes(req, res as ServerResponse)) return;
      res.statusCode = 404;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ error: { code: 'not_found', message: 'no such endpoint' } }));
    };
    // The secure server does its own TLS with SNICallback, so certificate reloads reach it through
    // `this.secureContext`; h2 and http/1.1 are chosen by ALPN.
    this.web = {
      // A client certificate is asked for but never required: agents renew with theirs (verified
      // against the cluster CA, which each context names, so browsers holding no certificate from
      // it are not prompted); everyone else sends none and is served as before.
      secure: createSecureServer(
        {
          allowHTTP1: true,
          requestCert: true,
          rejectUnauthorized: false,
          SNICallback: (name, cb) => cb(null, this.sniContexts.get(name.toLowerCase()) ?? this.secureContext),
        },
        onRequest,
      ),
      http1: createHttpServer(onRequest),
      h2c: createH2cServer(onRequest),
    };
  }

  static async start(options: GateProxyOptions): Promise<GateProxy> {
    const proxy = new GateProxy(options);
    await proxy.apply(options.config);
    return proxy;
  }

  /** Where the development CA is, when the proxy made its own certificates. */
  get caFile(): string | undefined {
    return this.certificates.caFile;
  }

  /** The configuration running now. */
  get currentConfig(): GateConfig {
    return this.config;
  }

  /** The cluster CA's certificate file (in data_dir): what agents trust and what signs their certificates. */
  get clusterCaFile(): string {
    return this.certificates.clusterCaFile;
  }

  /** The pin agents are given to check the cluster CA with: `sha256:<hex of its SubjectPublicKeyInfo>`. */
  get caPin(): string {
    return caPin(this.certificates.clusterCa.cert);
  }

  /** The file holding the development join token (mode 0600 in data_dir). */
  get devTokenFile(): string {
    return this.devTokenPath;
  }

  /** Agents' reverse tunnels: who is connected, and streams through them. */
  get tunnels(): TunnelRegistry {
    return this.registry;
  }

  /** The listeners with the ports they are bound to. */
  get plan(): ListenerPlan {
    return {
      mode: this.config.listenerMode,
      listeners: this.listeners.map((l) => ({ ...l.spec, port: l.port })),
    };
  }

  stats(): Record<string, StatsSnapshot> {
    return Object.fromEntries(this.listeners.map((l) => [l.spec.name, l.mux.stats()]));
  }

  /** New configuration and certificates; established connections keep running on the old routes. */
  async reload(config: GateConfig): Promise<void> {
    await this.apply(config);
    this.logger.info({ source: config.source }, 'configuration reloaded');
  }

  async close(options: { graceMs?: number } = {}): Promise<void> {
    const listeners = this.listeners;
    this.listeners = [];
    // Agents are told first (GOAWAY): their open streams may finish within the grace period,
    // and they reconnect elsewhere or when this proxy is back instead of waiting on a dead path.
    this.registry.goAway();
    await Promise.all(listeners.map((l) => l.mux.close(options)));
    this.registry.close();
  }

  private async apply(config: GateConfig): Promise<void> {
    // Everything that can fail (files, certificates, route tables) is built before anything is
    // swapped, so a bad reload leaves the running proxy as it was.
    const dataDir = config.dataDir ?? '.data';
    const certificates = await loadProxyCertificates(config, dataDir);
    const devToken = await loadDevToken(dataDir);
    // Each context names the cluster CA: it verifies the client certificates agents renew with.
    const clientCa = certificates.clusterCa.cert;
    const secureContext = createSecureContext({ ...certificates.default, ca: clientCa });
    const sniContexts = new Map(Object.entries(certificates.bySni).map(([name, pair]) => [name, createSecureContext({ ...pair, ca: clientCa })]));
    const channels = new VersionChannels({
      channels: config.proxy.automaticUpgradesChannels,
      proxyVersion: this.options.version,
      fetchText: this.options.fetchText ?? defaultFetch,
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    const plan = planListeners(config);
    const routesOf = (spec: ListenerSpec) => spec.routes.map((r) => routeFor(r, certificates, this.web, { tunnels: this.registry, ...(this.options.env ? { env: this.options.env } : {}) }));
    const next = plan.listeners.map((spec) => ({ spec, routes: routesOf(spec) }));

    this.config = config;
    this.certificates = certificates;
    this.secureContext = secureContext;
    this.sniContexts = sniContexts;
    this.revoked = new Set(config.agents.revokedSerials);
    // A certificate revoked by this reload ends its agent's tunnel now, not at its next connect.
    this.registry.revalidate();
    this.joinTokens.replace([...config.agents.joinTokens, devToken]);
    this.devTokenPath = join(dataDir, DEV_TOKEN_FILE);
    this.authority = new AgentAuthority({
      ca: certificates.clusterCa,
      tokens: this.joinTokens,
      certificateTtlMs: () => this.config.agents.certificateTtlMs,
      isRevoked: (serial) => this.revoked.has(serial),
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    // The default context, for clients that send no SNI (curl to an IP address).
    (this.web.secure as TlsServer).setSecureContext({ ...certificates.default, ca: clientCa });
    this.channels = channels;
    this.webRoutes = createWebRoutes({
      ping: () => buildPing(this.config, this.plan, this.options.version),
      channels: this.channels,
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });

    const running = new Map(this.listeners.map((l) => [listenerKey(l.spec), l]));
    const kept: RunningListener[] = [];
    for (const { spec, routes } of next) {
      const existing = running.get(listenerKey(spec));
      if (existing) {
        existing.mux.setRoutes(routes);
        existing.spec = spec;
        running.delete(listenerKey(spec));
        kept.push(existing);
        continue;
      }
      const p = config.proxy;
      const mux = new Multiplexer({
        routes,
        detectTimeoutMs: p.detectTimeoutMs,
        idleTimeoutMs: p.idleTimeoutMs,
        maxConnections: p.maxConnections,
        proxyProtocol: p.proxyProtocol === 'on' ? { mode: 'on', trusted: p.proxyProtocolTrustedNetworks } : { mode: 'off' },
        ...(this.options.logger ? { logger: this.options.logger.child({ listener: spec.name }) } : {}),
      });
      const address = await mux.listen({
        host: spec.host,
        port: spec.port,
        ...(spec.silentRoute !== undefined ? { silentRoute: spec.silentRoute } : {}),
        ...(spec.silentAfterMs !== undefined ? { silentAfterMs: spec.silentAfterMs } : {}),
      });
      kept.push({ spec, mux, port: address.port });
    }
    // Listeners the new configuration no longer has: stop accepting, let their connections finish.
    for (const gone of running.values()) void gone.mux.close({ graceMs: 30_000 });
    this.listeners = kept;
  }
}

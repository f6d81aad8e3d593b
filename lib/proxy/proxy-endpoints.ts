import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GateError } from '../errors.js';
import type { Closable, CloseOptions, LifecycleState } from '../lifecycle.js';
import type { Logger } from '../log.js';
import { ConnectionUpgrade, type StreamAcceptor } from '../conn-upgrade/upgrade-server.js';
import { createJoinRoutes } from '../tunnel/join-endpoint.js';
import { createAdminRoutes, type AdminEndpointOptions } from '../admin/admin-endpoint.js';
import type { MaintenanceConfig } from '../config/maintenance-schedule.js';
import { createWebRoutes, type WebRequestHandler } from '../web/routes.js';
import type { FindAutoUpdate } from '../web/find.js';
import type { ListenerPlan } from './listener-plan.js';
import { buildPing } from './ping.js';
import type { ProxyState } from './proxy-state.js';
import type { WebFrontDoor } from './web-front-door.js';

export interface ProxyEndpointsOptions {
  /** The proxy's own version (ping's server_version, the `default` channel). */
  version: string;
  /** The running state: read at each request, so a reload reaches requests at once. */
  state: () => ProxyState;
  /** The listeners with their bound ports, for ping. */
  plan: () => ListenerPlan;
  /** Where upgraded streams go: the shared port's multiplexer (none while the proxy runs separate ports). */
  upgradeTarget: () => StreamAcceptor | undefined;
  /** The maintenance window served now (the cluster store's, else the configuration's); default: the configuration's. */
  maintenance?: () => MaintenanceConfig | undefined;
  /** The rollout's answer to an updater's find (`/v1/webapi/find`); unset: unmanaged. */
  find?: (host: string, group: string) => FindAutoUpdate;
  /** The admin endpoint (`/v1/admin/`), when the proxy serves one. */
  admin?: AdminEndpointOptions;
  logger?: Logger | undefined;
}

/**
 * What the proxy answers on its web front door, in the order asked: the connection upgrade (TLS
 * routing through load balancers that end TLS; it takes the HTTP `upgrade` event, not requests),
 * joining and renewal, the admin endpoint, then ping, the automatic-upgrade version channels and the rollout's find. `apply` takes a
 * reloaded state's certificates, channels and upgrade settings.
 */
export class ProxyEndpoints implements Closable {
  readonly upgrade: ConnectionUpgrade;
  private webRoutes: WebRequestHandler;

  constructor(
    private readonly door: WebFrontDoor,
    private readonly options: ProxyEndpointsOptions,
  ) {
    const logger = options.logger ? { logger: options.logger } : {};
    this.upgrade = new ConnectionUpgrade({ target: options.upgradeTarget, ...logger });
    this.upgrade.attach(door.servers.secure);
    this.upgrade.attach(door.servers.http1);
    const joinRoutes = createJoinRoutes(
      () => options.state().authority,
      () => options.state().certificates.clusterCa.cert,
      options.logger,
      () => options.state().config.agents.limits,
    );
    door.use((req, res) => joinRoutes(req as IncomingMessage, res as ServerResponse));
    if (options.admin) {
      const adminRoutes = createAdminRoutes(options.admin);
      door.use((req, res) => adminRoutes(req as IncomingMessage, res as ServerResponse));
    }
    this.webRoutes = this.webRoutesFor(options.state());
    door.use((req, res) => this.webRoutes(req, res as ServerResponse));
  }

  /** Makes `state` the one answered from: its certificates for new TLS connections, its channels, its upgrade settings. */
  apply(state: ProxyState): void {
    this.webRoutes = this.webRoutesFor(state);
    this.door.useTls(state.webTls);
    this.upgrade.setOptions({
      trustedNetworks: state.config.proxy.connectionUpgradeTrustedNetworks,
      pingIntervalMs: state.config.proxy.connectionUpgradePingIntervalMs,
    });
  }

  /** The connection upgrade's: nothing else here holds a socket or timer. */
  get state(): LifecycleState {
    return this.upgrade.state;
  }

  close(options: CloseOptions = {}): Promise<void> {
    return this.upgrade.close(options);
  }

  destroy(err?: GateError): void {
    this.upgrade.destroy(err);
  }

  private webRoutesFor(state: ProxyState): WebRequestHandler {
    const { options } = this;
    return createWebRoutes({
      ping: () => buildPing(options.state().config, options.plan(), options.version),
      channels: state.channels,
      maintenance: options.maintenance ?? (() => options.state().config.proxy.clusterMaintenanceConfig),
      ...(options.find ? { find: options.find } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    });
  }
}

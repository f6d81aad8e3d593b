import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, within, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import type { GateMetrics } from './metrics.js';
import { readinessOf, type ReadinessSource } from './readiness.js';
import type { InventoryRow } from './inventory.js';

export interface DiagServerOptions {
  host: string;
  port: number;
  metrics: GateMetrics;
  /** Asked at each `/readyz`; the list may change while the server runs (a cluster member joins later). */
  readiness: () => Iterable<ReadinessSource>;
  /** The cluster's fleet, for `/v1/inventory` (`gate-mux inventory ls`); without it the path answers 404. */
  inventory?: () => Promise<InventoryRow[]>;
  /**
   * The bearer token `/metrics` and `/v1/inventory` ask for (`diag_token_file`), per request (it
   * follows reloads); undefined: they are open, as on a loopback address without a token.
   */
  token?: () => string | undefined;
  logger?: Logger;
}

/** The paths that need the token when there is one: the fleet's inventory and every counter. Probes stay open. */
const GUARDED_PATHS: ReadonlySet<string> = new Set(['/metrics', '/v1/inventory']);

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** `Authorization: Bearer <token>`, compared as SHA-256 digests in constant time (the length of neither leaks). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const presented = /^Bearer +(\S+)\s*$/i.exec(header ?? '')?.[1] ?? '';
  return timingSafeEqual(digest(presented), digest(token));
}

/** The paths served, each GET (and HEAD, which Node answers without the body). */
export const DIAG_PATHS = ['/healthz', '/readyz', '/metrics', '/v1/inventory'] as const;

/**
 * The diagnostics listener (`diag_addr`): plain HTTP for load balancers and Prometheus,
 * apart from the public listeners so that /metrics is never served where clients connect.
 * `/healthz`: 200 while the process serves. `/readyz`: 200 when every readiness source is ready,
 * else 503, with JSON detail either way. `/metrics`: Prometheus text. `/v1/inventory`: the
 * cluster's agents as a JSON array (InventoryRow), read from the route store; 503 with the code
 * when the store cannot be read. With a token (`diag_token_file`, which a non-loopback address
 * requires), `/metrics` and `/v1/inventory` answer 401 `GATE_ERR_DIAG_UNAUTHORIZED` without it;
 * `/healthz` and `/readyz` stay open for load balancers' probes.
 */
export class DiagServer implements Closable {
  private readonly log: Logger;
  private readonly lifecycle = new Lifecycle();

  private constructor(
    private readonly server: Server,
    private readonly options: DiagServerOptions,
    logger: Logger,
  ) {
    this.log = logger;
  }

  /** Binds the listener; GATE_ERR_LISTEN_FAILED when the address cannot be. */
  static async start(options: DiagServerOptions): Promise<DiagServer> {
    const log = componentLogger(options.logger, 'diag');
    let diag: DiagServer | undefined;
    const server = createServer((req, res) => diag!.serve(req, res));
    diag = new DiagServer(server, options, log);
    // A scraper or prober that stops mid-request must not hold a socket for long.
    server.headersTimeout = 10_000;
    server.requestTimeout = 10_000;
    server.keepAliveTimeout = 5_000;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ host: options.host, port: options.port }, () => {
          server.removeListener('error', reject);
          resolve();
        });
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new GateError(ErrorCodes.LISTEN_FAILED, `diag_addr: cannot listen on ${options.host}:${options.port} (${code})`, {
        cause: err,
      });
    }
    server.on('error', (err) =>
      log.error({ err: new GateError(ErrorCodes.LISTEN_FAILED, `diag listener: ${err.message}`, { cause: err }) }, 'diag listener error'),
    );
    const address = diag.address;
    log.info({ address: address.address, port: address.port }, 'diagnostics listening (/healthz, /readyz, /metrics, /v1/inventory)');
    return diag;
  }

  get address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  /** open, closing (requests in flight finishing), closed. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * Stops listening; requests in flight get `graceMs` (default 0) to be answered, then every
   * connection (keep-alive ones included) ends. Resolves when the listener is closed; a second
   * call returns the same promise.
   */
  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      const graceMs = options.graceMs ?? 0;
      if (graceMs > 0) {
        this.server.closeIdleConnections();
        await within(closed, graceMs);
      }
      this.server.closeAllConnections();
      await closed;
    });
  }

  /** Stops listening and ends every connection now. */
  destroy(_err?: GateError): void {
    if (!this.lifecycle.destroy()) return;
    this.server.close();
    this.server.closeAllConnections();
  }

  private serveInventory(res: ServerResponse): void {
    const { inventory } = this.options;
    if (!inventory) return send(res, 404, 'application/json', JSON.stringify({ error: 'no inventory on this listener' }));
    inventory().then(
      (rows) => send(res, 200, 'application/json', JSON.stringify(rows)),
      (err: unknown) => {
        const code = codeOf(err);
        this.log.warn({ code, err }, 'inventory read failed');
        send(res, 503, 'application/json', JSON.stringify({ error: `the inventory cannot be read: ${(err as Error).message}`, code }));
      },
    );
  }

  private serve(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (!(DIAG_PATHS as readonly string[]).includes(path ?? ''))
      return send(res, 404, 'application/json', JSON.stringify({ error: 'not found', paths: DIAG_PATHS }));
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return send(res, 405, 'application/json', JSON.stringify({ error: 'method not allowed' }));
    }
    if (path === '/healthz') return send(res, 200, 'application/json', '{"status":"ok"}');
    const token = this.options.token?.();
    if (token !== undefined && GUARDED_PATHS.has(path ?? '') && !bearerMatches(req.headers.authorization, token)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="gate-mux diagnostics"');
      return send(
        res,
        401,
        'application/json',
        JSON.stringify({
          error: `${path} needs the diag_token_file token (Authorization: Bearer ...)`,
          code: ErrorCodes.DIAG_UNAUTHORIZED,
        }),
      );
    }
    if (path === '/readyz') {
      const report = readinessOf(this.options.readiness());
      return send(res, report.ready ? 200 : 503, 'application/json', JSON.stringify(report));
    }
    if (path === '/v1/inventory') return this.serveInventory(res);
    const { metrics } = this.options;
    metrics.metrics().then(
      (text) => send(res, 200, metrics.contentType, text),
      (err: unknown) => {
        this.log.error(
          { err: new GateError(ErrorCodes.HANDLER_FAILED, `metrics collection failed: ${(err as Error).message}`, { cause: err }) },
          'metrics collection failed',
        );
        send(res, 500, 'application/json', JSON.stringify({ error: 'metrics collection failed' }));
      },
    );
  }
}

function codeOf(err: unknown): string {
  return err instanceof GateError ? err.code : ErrorCodes.HANDLER_FAILED;
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Cache-Control', 'no-store');
  res.end(body);
}

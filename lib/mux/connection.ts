import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ClientCounts, ConnectionParts, Part } from '../handlers/context.js';
import type { ConnectionInfo, Endpoint } from '../handlers/types.js';
import type { ClientEnd } from '../transport/client-end.js';
import type { ConnectionBudget } from './connection-budget.js';

export type { ClientCounts, Part };

/**
 * Where one accepted connection is: `detecting` until a route takes it, `routed` while its
 * handler serves it, `closing` once its parts are being destroyed (a failure, a shutdown's grace
 * over), `closed` when every part has closed and the connection has been counted and logged.
 */
export type ConnectionPhase = 'detecting' | 'routed' | 'closing' | 'closed';

/**
 * One accepted client connection and the parts that belong to it (the client, an upstream
 * socket, a TLS wrapper, a handle relay). It ends when every part has closed; then `onFinish`
 * runs exactly once.
 */
export class Connection implements ConnectionParts {
  readonly info: ConnectionInfo;
  readonly logger: Logger;
  error: GateError | undefined;
  /** Whose counts are the client's: the ClientEnd, then the socket or relay it became. */
  counts: ClientCounts;
  /**
   * Set while detecting: stops its timers when the connection ends first; with an error, ends
   * the detection with it (shedding under pressure).
   */
  stopDetection: ((error?: GateError) => void) | undefined;
  /** How far detection got when it ended without a decision (Detector.stage), for the log line. */
  stage: string | undefined;
  /** The budget whose slot this connection holds, until it is released. */
  slot: ConnectionBudget | undefined;
  /** The idle sweep watching this connection's relay (fast path with an idle timeout). */
  idleSweep: { delete(item: object): void } | undefined;
  // A handful at most (client, upstream, TLS wrapper): an array costs less than a Set per connection.
  private readonly parts: Part[] = [];
  private client: Part;
  #state: ConnectionPhase = 'detecting';

  constructor(
    id: number,
    readonly clientEnd: ClientEnd,
    clientPart: Part,
    logger: Logger,
    private readonly onFinish: (conn: Connection) => void,
  ) {
    this.logger = logger;
    this.stage = undefined;
    this.slot = undefined;
    this.idleSweep = undefined;
    this.counts = clientEnd;
    this.info = new Info(id, clientEnd);
    this.client = clientPart;
    if (isStream(clientPart)) this.adopt(clientPart);
    else this.parts.push(clientPart);
  }

  get state(): ConnectionPhase {
    return this.#state;
  }

  /** True once a route took it (its counters are the route's too), whatever its state now. */
  get routed(): boolean {
    return this.info.route !== '';
  }

  /** A route took it: `info.route` names the route from here on. */
  markRouted(route: string): void {
    this.info.route = route;
    if (this.#state === 'detecting') this.#state = 'routed';
  }

  /**
   * `side` names whose failure a bare stream error is ('upstream' for dialed sockets), so a
   * reset is logged as GATE_ERR_UPSTREAM_RESET or GATE_ERR_CLIENT_RESET as it really was.
   */
  adopt(stream: Duplex, side: 'client' | 'upstream' = 'client'): void {
    if (this.parts.includes(stream)) return;
    if (this.#state === 'closed' || stream.destroyed) {
      stream.destroy();
      return;
    }
    this.parts.push(stream);
    // An error nobody else listens to must not crash the process; `fail` records the first one.
    stream.on('error', (err) => this.recordError(err, side));
    stream.once('close', () => this.closed(stream));
  }

  /** The client is `next` from now on (the socket made from a handle, a relay owning it). */
  handOver(next: Part, counts: ClientCounts): void {
    const previous = this.client;
    this.client = next;
    this.counts = counts;
    if (isStream(next)) this.adopt(next);
    else this.parts.push(next);
    this.remove(previous);
  }

  /** Adds a part that reports its own close with closed(). */
  attach(part: Part): void {
    if (this.#state === 'closed') part.destroy();
    else this.parts.push(part);
  }

  /** A part that reports its own close (not a stream) has closed. */
  closed(part: Part): void {
    if (!this.remove(part)) return;
    if (part === this.client) this.destroyAll(); // no client, nothing left to serve
    if (this.parts.length === 0) this.finish();
  }

  fail(error: Error): void {
    this.recordError(error);
    this.destroyAll();
  }

  /** Records `error` as the connection's failure unless one is recorded already. */
  recordError(err: Error, side: 'client' | 'upstream' = 'client'): void {
    if (this.error) return;
    this.error =
      err instanceof GateError
        ? err
        : new GateError(
            side === 'upstream' ? ErrorCodes.UPSTREAM_RESET : this.routed ? ErrorCodes.CLIENT_RESET : ErrorCodes.CLIENT_CLOSED,
            `connection failed: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
            { cause: err },
          );
  }

  /** Destroys every part of this connection (shutdown after grace, failures). */
  destroyAll(): void {
    if (this.#state !== 'closed') this.#state = 'closing';
    // Newest first: a TLSSocket (or other wrapper) goes before the socket under it. Destroying
    // the raw socket first from inside the TLSSocket's 'secure' event (an mTLS rejection)
    // corrupts memory in Node 20.20 (SIGSEGV / "malloc(): unsorted double linked list corrupted").
    for (const part of [...this.parts].reverse()) part.destroy();
  }

  private remove(part: Part): boolean {
    const { parts } = this;
    const at = parts.indexOf(part);
    if (at < 0) return false;
    for (let i = at + 1; i < parts.length; i++) parts[i - 1] = parts[i]!;
    parts.length--;
    return true;
  }

  private finish(): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.onFinish(this);
  }
}

function isStream(part: Part): part is Duplex {
  return typeof (part as Partial<Duplex>).once === 'function';
}

/**
 * The connection's info. The remote address is read at once: after a reset the kernel no longer
 * tells it, and a failure's log line names it. The local one is read when first asked for: on a
 * bare handle it costs a syscall, and most connections never need it. It is an own enumerable
 * accessor (spread and JSON see it, as on a plain object) defined with one shared descriptor:
 * an object literal with an accessor would be a dictionary-mode object, slow on every access.
 */
class Info implements ConnectionInfo {
  protocol: ConnectionInfo['protocol'] = 'silent';
  sni: string | undefined = undefined;
  alpn: string[] = [];
  negotiatedAlpn: string | undefined = undefined;
  remote: Endpoint;
  declare local: Endpoint;
  proxyHeader: ConnectionInfo['proxyHeader'] = undefined;
  postgresSslRequest = false;
  route = '';
  helloBytes: number | undefined = undefined;
  readonly #client: ClientEnd;
  #local: Endpoint | undefined = undefined;

  constructor(
    readonly id: number,
    client: ClientEnd,
  ) {
    this.#client = client;
    this.remote = client.remote;
    Object.defineProperty(this, 'local', LOCAL);
  }

  static readLocal(info: Info): Endpoint {
    info.#local ??= info.#client.local;
    return info.#local;
  }

  static writeLocal(info: Info, value: Endpoint): void {
    info.#local = value;
  }
}

const LOCAL: PropertyDescriptor = {
  get(this: Info): Endpoint {
    return Info.readLocal(this);
  },
  set(this: Info, value: Endpoint): void {
    Info.writeLocal(this, value);
  },
  enumerable: true,
  configurable: true,
};

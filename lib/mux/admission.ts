import type { BlockList } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import { trustedNetworks } from '../proxy-protocol/trusted-networks.js';
import type { ClientEnd } from '../transport/client-end.js';
import { ConnectionBudget, processBudget } from './connection-budget.js';
import type { Connection } from './connection.js';
import { describeCap } from './descriptor-limit.js';
import type { MultiplexerSettings } from './types.js';

/**
 * Undecided connections looked at when one must be shed: the oldest this many, so the work per
 * accept at the cap stays bounded however many are open.
 */
const SHED_SCAN = 32;

/**
 * Who gets in, before a byte is read: the multiplexer's admission at accept (PROXY-trusted
 * sources, the per-source count, the cap and its fair share under pressure) and the shedding of
 * an undecided connection to make room at the cap. The multiplexer (multiplexer.ts) keeps
 * detection and routing; this holds the slots. Settings come from `configure` (a reload: new
 * connections follow them, admitted ones keep the slot they took).
 */
export class Admission {
  /** The budget new connections take a slot in (shared, own, or the process's). */
  budget!: ConnectionBudget;
  /** With PROXY protocol on: the networks trusted to send a header. */
  trusted: BlockList | undefined = undefined;
  /** How the budget's cap was arrived at, for the 'listening' line. */
  capFrom = '';
  /** This multiplexer's own budget, once it had a cap or fair share of its own. */
  private ownBudget: ConnectionBudget | undefined = undefined;

  constructor(
    private readonly logger: Logger,
    /** The multiplexer's undecided connections, oldest first: the candidates for shedding. */
    private readonly undecided: ReadonlySet<Connection>,
  ) {}

  /** New settings, already normalized (normalizeSettings threw on bad ones before any change). */
  configure(options: MultiplexerSettings, trusted: readonly string[] | undefined): void {
    const networks = trusted ? trustedNetworks(trusted) : undefined;
    this.budget = this.budgetFor(options);
    this.trusted = networks;
  }

  /**
   * Whether `client` may be admitted: the refusal, or whether a PROXY header must come first and
   * the source it counts against now (undefined behind a balancer: counted once the header is
   * read). `fromListener`: the client came in on one of our listeners, so with PROXY protocol on
   * it must be a trusted balancer and send a header; a carried stream was vouched for by its
   * carrier. May shed an undecided connection to make room.
   */
  check(client: ClientEnd, fromListener: boolean, maxPerSource: number): GateError | { expectHeader: boolean; source: string | undefined } {
    const { address } = client.remote;
    const expectHeader = fromListener && this.trusted !== undefined;
    if (this.trusted && expectHeader) {
      if (!this.trusted.check(address, client.remote.family === 'IPv6' ? 'ipv6' : 'ipv4')) {
        return new GateError(ErrorCodes.PROXY_HEADER_REFUSED, 'source not trusted to send PROXY headers');
      }
    }
    const budget = this.budget;
    // Behind a PROXY-speaking load balancer every socket comes from the balancer: the client is
    // only known once the header is read (detect), so it is counted there instead.
    const source = expectHeader ? undefined : address;
    // Counted in the budget (over every multiplexer sharing it), so a limit set by setOptions
    // counts the connections already open too.
    if (source !== undefined && maxPerSource > 0 && budget.sources.count(source) >= maxPerSource)
      return tooManyFromSource(source, maxPerSource);
    if (budget.full && !this.shedFor(source)) {
      return new GateError(ErrorCodes.TOO_MANY_CONNECTIONS, `at the cap of ${budget.cap} open connections`);
    }
    if (source !== undefined && budget.underPressure && budget.sources.count(source) >= budget.sourceLimit) {
      return overShare(source, budget);
    }
    return { expectHeader, source };
  }

  /** Takes the slot `check` allowed for `conn`, counted against `source` when known. */
  take(conn: Connection, source: string | undefined): void {
    const budget = this.budget;
    budget.open++;
    conn.slot = budget;
    if (source !== undefined) budget.sources.admit(conn.clientEnd, source, 0);
  }

  /**
   * The slots new connections take: the given budget; else one of this multiplexer's own when it
   * has its own cap or fair share (kept across setOptions, so its count stays true); else the
   * process-wide one, capped by the open-file limit.
   */
  private budgetFor(options: MultiplexerSettings): ConnectionBudget {
    if (options.budget) {
      this.capFrom = 'shared budget';
      return options.budget;
    }
    const { maxConnections = 0, highWater, sourceShare } = options;
    if (maxConnections > 0 || highWater !== undefined || sourceShare !== undefined) {
      const descriptors = processBudget().from; // read once per process
      const cap = maxConnections > 0 ? maxConnections : descriptors.cap;
      const settings = { cap, ...(highWater !== undefined ? { highWater } : {}), ...(sourceShare !== undefined ? { sourceShare } : {}) };
      if (this.ownBudget) this.ownBudget.setOptions(settings);
      else this.ownBudget = new ConnectionBudget(settings);
      this.capFrom = maxConnections > 0 ? 'maxConnections' : describeCap(descriptors);
      if (cap > descriptors.cap) {
        this.logger.warn(
          { maxConnections: cap, descriptorCap: descriptors.cap },
          `maxConnections ${cap} is above what the open-file limit carries (${describeCap(descriptors)} = ${descriptors.cap}): connections past it may fail to dial; raise the limit (systemd LimitNOFILE)`,
        );
      }
      return this.ownBudget;
    }
    const shared = processBudget();
    this.capFrom = describeCap(shared.from);
    return shared.budget;
  }

  /**
   * At the cap, makes room for a connection from `source` (undefined: not known yet, behind a
   * PROXY-speaking balancer) by closing an undecided one: of the oldest SHED_SCAN undecided
   * connections, the one whose source holds the most open connections (the oldest on a tie),
   * and only when that source holds more than the newcomer's and the newcomer's is under its fair
   * share (else it would be refused after all). Routed connections are never shed, and a source
   * cannot churn its own connections: a flooding host's newcomer is refused instead. The shed one ends with GATE_ERR_SHED (and a TLS alert when it was sending a
   * ClientHello). Its slot is free at once.
   */
  private shedFor(source: string | undefined): boolean {
    const budget = this.budget;
    let worst = source === undefined ? 0 : budget.sources.count(source);
    if (worst >= budget.sourceLimit) return false;
    let victim: Connection | undefined;
    let scanned = 0;
    for (const conn of this.undecided) {
      if (conn.slot === budget) {
        // Not counted yet: behind a balancer, a connection whose PROXY header has not arrived.
        const held = budget.sources.countOf(conn.clientEnd) ?? Number.MAX_SAFE_INTEGER;
        if (held > worst) {
          worst = held;
          victim = conn;
        }
      }
      if (++scanned >= SHED_SCAN) break;
    }
    if (!victim) return false;
    this.releaseSlot(victim);
    victim.stopDetection?.(
      new GateError(ErrorCodes.SHED, `undecided connection closed to make room at the cap of ${budget.cap} open connections`),
    );
    return true;
  }

  /** Gives a connection's slot and source counts back (idempotent). */
  releaseSlot(conn: Connection): void {
    const slot = conn.slot;
    if (!slot) return;
    conn.slot = undefined;
    slot.open--;
    slot.sources.release(conn.clientEnd);
  }
}

export function tooManyFromSource(address: string, max: number): GateError {
  return new GateError(ErrorCodes.TOO_MANY_FROM_SOURCE, `over ${max} open connections from ${address}`);
}

export function overShare(address: string, budget: ConnectionBudget): GateError {
  return new GateError(
    ErrorCodes.TOO_MANY_FROM_SOURCE,
    `over its fair share of ${budget.sourceLimit} open connections from ${address} (at ${budget.open} of ${budget.cap}, above the high-water mark)`,
  );
}

/**
 * What every proxy runs for managed rollouts. Each `intervalMs` (one second) it reads (through a
 * StorePoller, store-poller.ts) the rollout's three resources from the cluster store (autoupdate_config, autoupdate_version,
 * autoupdate_agent_rollout), so that `find` answers from memory: the public endpoint never makes a
 * store round trip of its own, and every proxy answers alike whichever one advanced the rollout.
 *
 * One proxy at a time also drives the rollout: the one holding the store's lease
 * (`autoupdate-agent-rollout`; SET NX PX in Redis, renewed at each step). Each step reads the
 * cluster's inventory, runs the state machine (rollout-controller.ts) from the stored state and
 * writes the result only over the revision it read (a compare-and-set): an operator's command
 * written meanwhile is never overwritten, and a proxy killed mid-step leaves the last state
 * written, which the next lease holder continues from. A step runs every `stepMs`: a tenth of
 * canary_timeout, from one to ten seconds.
 */
import { ErrorCodes } from '../errors.js';
import type { Closable, CloseOptions, LifecycleState } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { readInventory } from '../cluster/inventory.js';
import type { ResourceStore } from '../cluster/resource-store.js';
import type { RouteStore } from '../cluster/route-store.js';
import { advanceRollout, initialState, type RolloutAgent } from './rollout-controller.js';
import { rolloutConfigOf, rolloutVersionOf, strictestMode, type RolloutConfig, type RolloutVersion } from './rollout-spec.js';
import { findAnswer, rolloutDocument, rolloutStateOf, type FindAnswer, type RolloutState } from './rollout-state.js';
import {
  AUTOUPDATE_CONFIG_KIND,
  AUTOUPDATE_CONFIG_NAME,
  AUTOUPDATE_ROLLOUT_KIND,
  AUTOUPDATE_ROLLOUT_NAME,
  AUTOUPDATE_VERSION_KIND,
  AUTOUPDATE_VERSION_NAME,
} from './resource-kinds.js';
import { StorePoller } from './store-poller.js';

export const DEFAULT_READ_INTERVAL_MS = 1000;
export const MIN_STEP_MS = 1000;
export const MAX_STEP_MS = 10_000;
/** The lease outlives a few missed steps, no more: a dead holder's successor takes over within it. */
const LEASE_STEPS = 3;
/** Who the controller writes as. */
export const CONTROLLER_USER = 'rollout-controller';

export interface RolloutWatchOptions {
  store: () => (RouteStore & ResourceStore) | undefined;
  /** This proxy's id: the lease's holder. */
  proxyId: string;
  intervalMs?: number;
  /** Milliseconds between two steps of the controller; default from canary_timeout (above). */
  stepMs?: number;
  now?: () => number;
  logger?: Logger | undefined;
  /** Halts for /metrics: the groups halted now, and one halt detected here. */
  onHalted?: (groups: ReadonlyMap<string, boolean>) => void;
  onHalt?: (group: string) => void;
}

/** What was read last: the three resources, parsed. */
export interface View {
  config: RolloutConfig | undefined;
  version: RolloutVersion | undefined;
  state: RolloutState | undefined;
  stateRevision: number;
}

const EMPTY: View = { config: undefined, version: undefined, state: undefined, stateRevision: 0 };

/** The rollout's three resources, read and parsed (three reads: one round trip each). */
export async function readRollout(store: ResourceStore): Promise<View> {
  const [config, version, rollout] = await Promise.all([
    store.getResource(AUTOUPDATE_CONFIG_KIND, AUTOUPDATE_CONFIG_NAME),
    store.getResource(AUTOUPDATE_VERSION_KIND, AUTOUPDATE_VERSION_NAME),
    store.getResource(AUTOUPDATE_ROLLOUT_KIND, AUTOUPDATE_ROLLOUT_NAME),
  ]);
  return {
    config: config && rolloutConfigOf(config.document),
    version: version && rolloutVersionOf(version.document),
    state: rollout && rolloutStateOf(rollout.document),
    stateRevision: rollout?.revision ?? 0,
  };
}

/**
 * The rollout in force from what was read: the stored state when it is this target's, else (none
 * written yet, or one for an older target) every group unstarted. Undefined: nothing to roll out.
 */
export function rolloutInForce(view: View, now: number): RolloutState | undefined {
  const { config, version, state } = view;
  if (!config || !version) return undefined;
  if (state && state.startVersion === version.startVersion && state.targetVersion === version.targetVersion) {
    const mode = strictestMode(config.mode, version.mode);
    return state.mode === mode ? state : { ...state, mode };
  }
  return initialState(config, version, now);
}

export class RolloutWatch implements Closable {
  private readonly log: Logger;
  private readonly poller: StorePoller;
  private readonly now: () => number;
  private view: View = EMPTY;
  private lastStep = 0;
  private holding = false;

  constructor(private readonly options: RolloutWatchOptions) {
    this.log = componentLogger(options.logger, 'rollout');
    this.now = options.now ?? Date.now;
    this.poller = new StorePoller({
      intervalMs: options.intervalMs ?? DEFAULT_READ_INTERVAL_MS,
      poll: () => this.read(),
      logger: this.log,
      unreadable: 'cannot read the rollout from the cluster store; answering from what was read last',
      readableAgain: 'cluster store readable again: rollout read from it',
      afterStop: async () => {
        // Hand over at once: the next proxy need not wait for the lease to expire.
        const store = this.options.store();
        if (store && this.holding) await store.releaseLease(AUTOUPDATE_ROLLOUT_NAME, this.options.proxyId).catch(() => {});
        this.holding = false;
      },
    });
  }

  /**
   * The find answer for `host` in `group`, from what was read last. With a config and a version but
   * no state written yet (or one for an older target), every group is unstarted.
   */
  find(host: string, group: string): FindAnswer {
    const { config, version } = this.view;
    if (!config || !version || strictestMode(config.mode, version.mode) === 'disabled') return { managed: false };
    return findAnswer(this.current(), host, group);
  }

  /** The rollout as every proxy sees it now (undefined: none configured). */
  current(): RolloutState | undefined {
    return rolloutInForce(this.view, this.now());
  }

  /** Whether this proxy drives the rollout now. */
  get leaseHolder(): boolean {
    return this.holding;
  }

  /** Reads the store now and then every interval; resolves after the first read. */
  start(): Promise<void> {
    return this.poller.start();
  }

  /** One read, and a step when one is due (one at a time). */
  poll(): Promise<void> {
    return this.poller.poll();
  }

  get state(): LifecycleState {
    return this.poller.state;
  }

  close(_options: CloseOptions = {}): Promise<void> {
    return this.poller.close();
  }

  destroy(): void {
    this.poller.destroy();
  }

  private stepMs(): number {
    if (this.options.stepMs !== undefined) return this.options.stepMs;
    const timeout = this.view.config?.canaryTimeoutMs ?? MAX_STEP_MS * 10;
    return Math.min(MAX_STEP_MS, Math.max(MIN_STEP_MS, Math.floor(timeout / 10)));
  }

  private async read(): Promise<void> {
    const store = this.options.store();
    if (!store) return;
    // Unreadable: keep answering from what was read last.
    const read = await this.poller.readStore(() => readRollout(store));
    if (!read) return;
    this.view = read.value;
    this.report();
    if (this.now() - this.lastStep < this.stepMs() || this.poller.ending) return;
    this.lastStep = this.now();
    await this.step(store).catch((err: unknown) => {
      this.log.warn({ code: ErrorCodes.STORE_UNAVAILABLE, err }, `rollout step failed: ${(err as Error).message}`);
    });
  }

  private async step(store: RouteStore & ResourceStore): Promise<void> {
    const { config, version } = this.view;
    const wasHolding = this.holding;
    // At least three seconds, whatever the step: a lease that expires as it is taken is no lease.
    this.holding = await store.holdLease(AUTOUPDATE_ROLLOUT_NAME, this.options.proxyId, Math.max(this.stepMs(), MIN_STEP_MS) * LEASE_STEPS);
    if (this.holding !== wasHolding)
      this.log.info(
        { holder: this.holding },
        this.holding ? 'this proxy drives the agents rollout now (it holds the lease)' : 'another proxy drives the agents rollout',
      );
    if (!this.holding || !config || !version) return;
    const agents: RolloutAgent[] = (await readInventory(store)).map((row) => ({
      serverId: row.server_id,
      name: row.agent,
      hostname: row.hostname,
      group: row.update_group,
      version: row.version,
      since: Date.parse(row.since),
    }));
    const { state, events, changed } = advanceRollout(this.view.state, { config, version, agents, now: this.now() });
    if (!changed || !state) return;
    const written = await store.putResource(
      {
        kind: AUTOUPDATE_ROLLOUT_KIND,
        name: AUTOUPDATE_ROLLOUT_NAME,
        document: rolloutDocument(state, AUTOUPDATE_ROLLOUT_NAME, AUTOUPDATE_ROLLOUT_KIND),
        updatedBy: CONTROLLER_USER,
        updatedAt: this.now(),
      },
      { revision: this.view.stateRevision },
    );
    // Someone wrote the state since it was read (an operator's command): this step is dropped, and
    // the next one starts from what they wrote. Nothing is logged for a step not taken.
    if (!written) return;
    this.view = { ...this.view, state, stateRevision: written.revision };
    for (const event of events) {
      if (event.level === 'warn') {
        this.log.warn({ code: event.code, group: event.group, revision: written.revision }, event.message);
        if (event.code === ErrorCodes.ROLLOUT_HALTED) this.options.onHalt?.(event.group);
      } else this.log.info({ group: event.group, revision: written.revision }, event.message);
    }
    this.report();
  }

  private report(): void {
    const state = this.current();
    this.options.onHalted?.(new Map((state?.groups ?? []).map((g) => [g.name, g.state === 'halted'])));
  }
}

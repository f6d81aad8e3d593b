import { ErrorCodes, GateError } from '../errors.js';
import { processDescriptorCap, type DescriptorCap } from './descriptor-limit.js';
import { SourceCounts } from './source-limit.js';

/** Above this fraction of the cap the proxy is "under pressure" and the fair share applies. */
export const DEFAULT_HIGH_WATER = 0.8;
/** Under pressure, the fraction of the cap one source address may hold. */
export const DEFAULT_SOURCE_SHARE = 0.1;

export interface BudgetOptions {
  /** Open connections allowed (at least 1). */
  cap: number;
  /** Fraction of `cap` (0 < x <= 1) from which one source is held to `sourceShare`. Default 0.8. */
  highWater?: number;
  /** Fraction of `cap` (0 < x <= 1) one source may hold under pressure. Default 0.1. */
  sourceShare?: number;
}

/**
 * The open-connection slots of one or more multiplexers, shared by every listener of a
 * proxy because descriptors are a per-process resource. It always has a cap: by default the one
 * the open-file limit allows (descriptor-limit.ts). Below the high-water mark any source may open
 * as many connections as it likes (corporate NATs put many users behind one address); above it a
 * single source address (after PROXY-header resolution) is held to its share of the cap, so one
 * flooding host can never take the slots a second one needs.
 */
export class ConnectionBudget {
  cap = 1;
  highWater = DEFAULT_HIGH_WATER;
  sourceShare = DEFAULT_SOURCE_SHARE;
  /** Connections holding a slot now. */
  open = 0;
  private pressureAt = 1;
  private shareLimit = 1;
  /** Open connections by source address; counted always, limited only under pressure. */
  readonly sources = new SourceCounts();

  constructor(options: BudgetOptions) {
    this.setOptions(options);
  }

  /** New cap and fair share for new connections; connections holding slots keep them. */
  setOptions(options: BudgetOptions): void {
    const { cap, highWater = DEFAULT_HIGH_WATER, sourceShare = DEFAULT_SOURCE_SHARE } = options;
    if (!Number.isSafeInteger(cap) || cap < 1)
      throw new GateError(ErrorCodes.INVALID_ARGUMENT, `connection cap must be a whole number >= 1, got ${cap}`);
    for (const [name, value] of [
      ['highWater', highWater],
      ['sourceShare', sourceShare],
    ] as const) {
      if (!(value > 0 && value <= 1))
        throw new GateError(ErrorCodes.INVALID_ARGUMENT, `${name} must be a fraction above 0 and at most 1, got ${value}`);
    }
    this.cap = cap;
    this.highWater = highWater;
    this.sourceShare = sourceShare;
    this.pressureAt = Math.max(1, Math.ceil(cap * highWater));
    this.shareLimit = Math.max(1, Math.floor(cap * sourceShare));
  }

  /** Every slot is taken. */
  get full(): boolean {
    return this.open >= this.cap;
  }

  /** At or above the high-water mark: the fair share applies to new connections. */
  get underPressure(): boolean {
    return this.open >= this.pressureAt;
  }

  /** Open connections one source may hold under pressure. */
  get sourceLimit(): number {
    return this.shareLimit;
  }

  /** Counts `owner` against `address`; false (nothing counted) when over its share under pressure. */
  admitSource(owner: object, address: string): boolean {
    return this.sources.admit(owner, address, this.underPressure ? this.shareLimit : 0);
  }
}

let shared: { budget: ConnectionBudget; from: DescriptorCap } | undefined;

/**
 * The process-wide budget every multiplexer without a cap of its own shares: its cap is what the
 * open-file limit allows, read once.
 */
export function processBudget(): { budget: ConnectionBudget; from: DescriptorCap } {
  if (!shared) {
    const from = processDescriptorCap();
    shared = { budget: new ConnectionBudget({ cap: from.cap }), from };
  }
  return shared;
}

/**
 * The rollout's state machine: from the stored state, the two manifests, the agents the inventory
 * shows and the time, the next state and what happened. Each group goes unstarted → canary →
 * active → done, or halted, or rolled back (an operator's command, rollout-state.ts).
 *
 * halt-on-error (Teleport RFD 0184's strategy of that name, with the error detection its users
 * asked for): groups in order; one starts when its window allows (days, start_hour, UTC), the
 * previous one is done and that one's `wait` has passed. Its canaries (canary_count, picked among
 * its connected agents not yet on the target) are told first; the group is active once every
 * canary is connected on the target. A canary, or an agent in flight, that reconnects on another
 * version, or is not back on the target within canary_timeout, HALTS the rollout: no agent anywhere
 * is told anything more. In active, at most max_in_flight agents are told and not back yet.
 *
 * time-based: each group in its own one-hour window, no canary, no order; a failure halts that group.
 *
 * An agent is "back" when it is connected on the target; it "came back" on another version when
 * its tunnels are newer than the moment it was told (it restarted) and it reports another version.
 * Pure: the caller (rollout-runner.ts) brings the clock and the store.
 */
import { ErrorCodes } from '../errors.js';
import { DEFAULT_UPDATE_GROUP } from '../wire/names.js';
import { inFlightLimit, strictestMode, type RolloutConfig, type RolloutGroupSpec, type RolloutVersion } from './rollout-spec.js';
import type { GroupRollout, GroupState, RolloutState, ToldAgent } from './rollout-state.js';

/** One agent as the controller sees it (a row of the cluster's inventory: connected now). */
export interface RolloutAgent {
  serverId: string;
  /** The name its certificate carries (what messages call it: host names repeat, names do not). */
  name: string;
  hostname: string;
  group: string;
  version: string;
  /** Epoch ms its oldest tunnel still up was admitted. */
  since: number;
}

export interface RolloutEvent {
  level: 'info' | 'warn';
  group: string;
  /** GATE_ERR_ROLLOUT_HALTED for a halt. */
  code?: string;
  message: string;
}

export interface RolloutInputs {
  config: RolloutConfig | undefined;
  version: RolloutVersion | undefined;
  agents: readonly RolloutAgent[];
  now: number;
}

/** The state a rollout of `version` under `config` starts from: every group unstarted. */
export function initialState(config: RolloutConfig, version: RolloutVersion, now: number): RolloutState {
  return {
    startVersion: version.startVersion,
    targetVersion: version.targetVersion,
    strategy: config.strategy,
    mode: strictestMode(config.mode, version.mode),
    startedAt: now,
    groups: config.groups.map((g) => ({ name: g.name, state: 'unstarted', reason: '', changedAt: now, canaries: [], told: [] })),
  };
}

/** Whether `now` is in the group's window: one of its days (UTC) and from its start hour, for an hour. */
export function inWindow(spec: Pick<RolloutGroupSpec, 'days' | 'startHour'>, now: number): boolean {
  const date = new Date(now);
  return spec.days.includes(date.getUTCDay() as never) && date.getUTCHours() === spec.startHour;
}

/** Whether the group may start now (halt-on-error adds the previous group and its wait). */
function mayStart(config: RolloutConfig, state: RolloutState, index: number, now: number): string | true {
  const spec = config.groups[index]!;
  const group = state.groups[index]!;
  if (group.startNow) return true;
  if (config.strategy === 'halt-on-error' && index > 0) {
    const previous = state.groups[index - 1]!;
    if (previous.state !== 'done') return `waiting for group ${previous.name}`;
    const waitUntil = (previous.doneAt ?? 0) + spec.waitMs;
    if (now < waitUntil) return `waiting until ${new Date(waitUntil).toISOString()} (wait after group ${previous.name})`;
  }
  if (!inWindow(spec, now)) return `waiting for the window of group ${spec.name} (${windowText(spec)})`;
  return true;
}

const DAY = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
function windowText(spec: RolloutGroupSpec): string {
  const days = spec.days.length === 7 ? 'every day' : spec.days.map((d) => DAY[d]).join(',');
  return `${days} from ${String(spec.startHour).padStart(2, '0')}:00 UTC`;
}

/** The agents of each group: an agent naming no listed group is in the last one (the catch-all). */
function membersByGroup(config: RolloutConfig, agents: readonly RolloutAgent[]): Map<string, RolloutAgent[]> {
  const names = new Set(config.groups.map((g) => g.name));
  const last = config.groups.at(-1)?.name ?? DEFAULT_UPDATE_GROUP;
  const out = new Map<string, RolloutAgent[]>(config.groups.map((g) => [g.name, []]));
  for (const agent of [...agents].sort((a, b) => a.serverId.localeCompare(b.serverId)))
    out.get(names.has(agent.group) ? agent.group : last)!.push(agent);
  return out;
}

/**
 * One step. `previous` is the stored state (undefined: none yet). Returns the next state
 * (undefined when there is nothing to roll out: no autoupdate_config or no autoupdate_version) and
 * the events to log; `changed` says whether anything is to be written. Pure.
 */
export function advanceRollout(
  previous: RolloutState | undefined,
  inputs: RolloutInputs,
): { state: RolloutState | undefined; events: RolloutEvent[]; changed: boolean } {
  const { config, version, now } = inputs;
  const events: RolloutEvent[] = [];
  if (!config || !version) return { state: undefined, events, changed: previous !== undefined };
  let state: RolloutState;
  let changed = false;
  const sameRollout =
    previous &&
    previous.startVersion === version.startVersion &&
    previous.targetVersion === version.targetVersion &&
    previous.strategy === config.strategy;
  if (!sameRollout) {
    // A new target (or a first rollout): every group starts over.
    state = initialState(config, version, now);
    changed = true;
    events.push({
      level: 'info',
      group: '*',
      message: `rollout from ${version.startVersion} to ${version.targetVersion} begins (${config.strategy}; groups ${config.groups.map((g) => g.name).join(', ')})`,
    });
  } else {
    state = JSON.parse(JSON.stringify(previous)) as RolloutState;
    // Groups added or removed in the config: the ones kept keep their state, in the config's order.
    const names = config.groups.map((g) => g.name).join(',');
    if (state.groups.map((g) => g.name).join(',') !== names) {
      state.groups = config.groups.map(
        (g) =>
          state.groups.find((s) => s.name === g.name) ?? {
            name: g.name,
            state: 'unstarted',
            reason: '',
            changedAt: now,
            canaries: [],
            told: [],
          },
      );
      changed = true;
    }
  }
  const mode = strictestMode(config.mode, version.mode);
  if (state.mode !== mode) {
    state.mode = mode;
    changed = true;
    events.push({ level: 'info', group: '*', message: `rollout mode ${mode}` });
  }
  // Suspended: nobody is told anything, and nothing moves; disabled: the updaters use their channel.
  if (mode !== 'enabled') return { state, events, changed };

  const members = membersByGroup(config, inputs.agents);
  const byId = new Map(inputs.agents.map((a) => [a.serverId, a]));
  const target = state.targetVersion;
  const set = (group: GroupRollout, to: GroupState, reason: string, event?: Omit<RolloutEvent, 'group'>): void => {
    if (group.state === to && group.reason === reason) return;
    if (group.state !== to) {
      group.changedAt = now;
      if (to === 'done') group.doneAt = now;
      if (to === 'done' || to === 'halted' || to === 'rolledback') delete group.startNow;
    }
    group.state = to;
    group.reason = reason;
    changed = true;
    events.push({ level: 'info', group: group.name, message: `group ${group.name}: ${to}: ${reason}`, ...event });
  };
  const halt = (group: GroupRollout, reason: string): void =>
    set(group, 'halted', reason, {
      level: 'warn',
      code: ErrorCodes.ROLLOUT_HALTED,
      message: `rollout halted in group ${group.name}: ${reason}; no other agent is told to update (gate-mux autoupdate agents rollback, or start-update ${group.name} after a fix)`,
    });

  /** Follows up the told agents of a group: back on the target, came back wrong, or timed out. Returns a halt reason. */
  const check = (list: ToldAgent[], what: 'canary' | 'agent'): string | undefined => {
    for (const told of list) {
      if (told.backAt !== undefined) continue;
      const agent = byId.get(told.serverId);
      if (agent && agent.version === target) {
        told.backAt = now;
        changed = true;
        continue;
      }
      const name = told.name || told.hostname || told.serverId;
      if (agent && agent.since > told.toldAt) {
        told.cameBackOn = agent.version;
        changed = true;
        return `${what} ${name} came back on ${agent.version} (expected ${target})`;
      }
      if (now - told.toldAt > config.canaryTimeoutMs)
        return `${what} ${name} not back on ${target} within ${Math.round(config.canaryTimeoutMs / 1000)}s (canary_timeout)`;
    }
    return undefined;
  };
  const tell = (group: GroupRollout, agent: RolloutAgent, list: ToldAgent[]): void => {
    list.push({ serverId: agent.serverId, name: agent.name, hostname: agent.hostname, toldAt: now });
    changed = true;
    events.push({
      level: 'info',
      group: group.name,
      message: `group ${group.name}: ${agent.hostname || agent.serverId} told to update to ${target}`,
    });
  };

  const haltOnError = config.strategy === 'halt-on-error';
  for (const [index, group] of state.groups.entries()) {
    const spec = config.groups[index]!;
    const agents = members.get(group.name) ?? [];
    if (group.state === 'unstarted') {
      const may =
        haltOnError && state.groups.some((g) => g.state === 'halted')
          ? 'waiting: the rollout is halted'
          : mayStart(config, state, index, now);
      if (may !== true) {
        set(group, 'unstarted', may);
        continue;
      }
      const pending = agents.filter((a) => a.version !== target);
      if (haltOnError && spec.canaryCount > 0 && pending.length > 0) {
        for (const agent of pending.slice(0, spec.canaryCount)) tell(group, agent, group.canaries);
        set(group, 'canary', `${group.canaries.length} canar${group.canaries.length === 1 ? 'y' : 'ies'} told to update to ${target}`);
      } else set(group, 'active', 'started');
    }
    if (group.state === 'canary') {
      const why = check(group.canaries, 'canary');
      if (why) halt(group, why);
      else if (group.canaries.every((c) => c.backAt !== undefined)) set(group, 'active', 'every canary is back on the target');
      else continue;
    }
    if (group.state === 'active') {
      const why = check(group.told, 'agent');
      if (why) {
        halt(group, why);
        continue;
      }
      const haltedAnywhere = haltOnError && state.groups.some((g) => g.state === 'halted');
      const open = !haltOnError ? inWindow(spec, now) || group.startNow === true : true;
      const inFlight = group.told.filter((a) => a.backAt === undefined).length;
      let room = inFlightLimit(spec.maxInFlight, agents.length) - inFlight;
      if (!haltedAnywhere && open)
        for (const agent of agents) {
          if (room <= 0) break;
          if (
            agent.version === target ||
            group.canaries.some((c) => c.serverId === agent.serverId) ||
            group.told.some((c) => c.serverId === agent.serverId)
          )
            continue;
          tell(group, agent, group.told);
          room--;
        }
      const waiting = group.told.filter((a) => a.backAt === undefined).length;
      if (waiting === 0 && agents.every((a) => a.version === target))
        set(group, 'done', agents.length === 0 ? 'no agent in the group' : `every agent is on ${target}`);
      else if (!open) set(group, 'active', `waiting for the window of group ${spec.name} (${windowText(spec)})`);
    }
  }
  return { state, events, changed };
}

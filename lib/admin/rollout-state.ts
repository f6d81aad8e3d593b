/**
 * Where a rollout stands: the `autoupdate_agent_rollout` resource the controller writes
 * (rollout-controller.ts) and every proxy reads, so that any proxy answers an updater's find
 * (`findAnswer`) and a proxy taking the lease over continues from what was stored, neither losing
 * nor repeating a step. Each group records its state, why, and since when; which agents were told
 * to update and when (a canary or an agent in flight), and when each came back on the target.
 * Pure: no clock, no store.
 */
import { ErrorCodes, GateError } from '../errors.js';
import { DEFAULT_UPDATE_GROUP } from '../wire/names.js';
import type { RolloutMode, RolloutStrategy } from './rollout-spec.js';

export const GROUP_STATES = ['unstarted', 'canary', 'active', 'done', 'halted', 'rolledback'] as const;
export type GroupState = (typeof GROUP_STATES)[number];

/** An agent the controller told to update. */
export interface ToldAgent {
  serverId: string;
  /** Its certificate's name. */
  name: string;
  hostname: string;
  /** Epoch ms it was told. */
  toldAt: number;
  /** Epoch ms it was first seen connected on the target after that; absent until then. */
  backAt?: number;
  /** The version it came back on when that was not the target (what halted the group). */
  cameBackOn?: string;
}

export interface GroupRollout {
  name: string;
  state: GroupState;
  /** One line: why it is in that state. */
  reason: string;
  /** Epoch ms of the last change of state. */
  changedAt: number;
  /** Epoch ms the group was done (the next group's `wait` counts from it). */
  doneAt?: number;
  /** Its canaries (halt-on-error with canary_count). */
  canaries: ToldAgent[];
  /** The other agents told to update. */
  told: ToldAgent[];
  /** `start-update`: start now, whatever the window, the previous group or its wait. */
  startNow?: boolean;
}

export interface RolloutState {
  startVersion: string;
  targetVersion: string;
  strategy: RolloutStrategy;
  /** The mode in force (the stricter of autoupdate_config's and autoupdate_version's). */
  mode: RolloutMode;
  /** Epoch ms this rollout (this start and target) began. */
  startedAt: number;
  groups: GroupRollout[];
}

export interface FindAnswer {
  managed: boolean;
  agent_version?: string;
  agent_auto_update?: boolean;
  reason?: string;
}

/** The group an agent's group name falls in: its own when listed, else the last (the platform's catch-all). */
export function groupFor(state: Pick<RolloutState, 'groups'>, name: string): GroupRollout | undefined {
  return state.groups.find((g) => g.name === name) ?? state.groups.at(-1);
}

/** Whether `serverId` was told to update in `group` (a canary or in flight), and that entry. */
export function toldIn(group: GroupRollout, serverId: string): ToldAgent | undefined {
  return group.canaries.find((a) => a.serverId === serverId) ?? group.told.find((a) => a.serverId === serverId);
}

/** Why an unstarted group waits, in the words find and status give. */
function waitingReason(state: RolloutState, group: GroupRollout): string {
  const index = state.groups.indexOf(group);
  if (state.strategy === 'halt-on-error' && index > 0) {
    const previous = state.groups[index - 1]!;
    if (previous.state !== 'done') return `waiting for group ${previous.name}`;
  }
  return group.reason || `group ${group.name} waiting for its window`;
}

/**
 * The answer to `GET /v1/webapi/find?host=<server id>&group=<group>`: the version this host should
 * run now and whether to install it now. No state (no `autoupdate_config`, or mode disabled):
 * unmanaged, the updater uses its channel. Pure.
 */
export function findAnswer(state: RolloutState | undefined, host: string, groupName: string): FindAnswer {
  if (!state || state.mode === 'disabled') return { managed: false };
  const group = groupFor(state, groupName || DEFAULT_UPDATE_GROUP);
  if (!group) return { managed: false };
  const start = state.startVersion;
  const target = state.targetVersion;
  const told = toldIn(group, host);
  const role = group.canaries.some((a) => a.serverId === host) ? `canary of group ${group.name}` : `group ${group.name}`;
  let answer: Required<FindAnswer>;
  switch (group.state) {
    case 'unstarted':
      answer = { managed: true, agent_version: start, agent_auto_update: false, reason: waitingReason(state, group) };
      break;
    case 'canary':
    case 'active':
      answer = told
        ? { managed: true, agent_version: target, agent_auto_update: true, reason: `${role}: update to ${target}` }
        : {
            managed: true,
            agent_version: start,
            agent_auto_update: false,
            reason:
              group.state === 'canary'
                ? `group ${group.name}: waiting for its canaries`
                : `group ${group.name}: waiting for a place among the agents in flight`,
          };
      break;
    case 'done':
      answer = { managed: true, agent_version: target, agent_auto_update: true, reason: `group ${group.name} done` };
      break;
    case 'halted':
      // Nobody is told to install anything; an agent already back on the target keeps it.
      answer = {
        managed: true,
        agent_version: told?.backAt !== undefined ? target : start,
        agent_auto_update: false,
        reason: `halted: ${group.reason}`,
      };
      break;
    case 'rolledback':
      answer = { managed: true, agent_version: start, agent_auto_update: true, reason: 'rolled back' };
      break;
  }
  if (state.mode === 'suspended') return { ...answer, agent_auto_update: false, reason: 'suspended' };
  return answer;
}

/** A stored rollout state read back, or undefined when it is not one this version writes. Pure. */
export function rolloutStateOf(document: Record<string, unknown>): RolloutState | undefined {
  const status = (document.status ?? undefined) as Partial<RolloutState> | undefined;
  if (!status || typeof status !== 'object') return undefined;
  if (typeof status.startVersion !== 'string' || typeof status.targetVersion !== 'string' || !Array.isArray(status.groups))
    return undefined;
  const groups: GroupRollout[] = [];
  for (const g of status.groups as Partial<GroupRollout>[]) {
    if (typeof g?.name !== 'string' || !(GROUP_STATES as readonly string[]).includes(g.state as string)) return undefined;
    groups.push({
      name: g.name,
      state: g.state as GroupState,
      reason: typeof g.reason === 'string' ? g.reason : '',
      changedAt: Number(g.changedAt) || 0,
      ...(Number.isFinite(g.doneAt) ? { doneAt: g.doneAt as number } : {}),
      canaries: Array.isArray(g.canaries) ? g.canaries.map(copyTold) : [],
      told: Array.isArray(g.told) ? g.told.map(copyTold) : [],
      ...(g.startNow === true ? { startNow: true } : {}),
    });
  }
  return {
    startVersion: status.startVersion,
    targetVersion: status.targetVersion,
    strategy: status.strategy === 'time-based' ? 'time-based' : 'halt-on-error',
    mode: status.mode === 'disabled' || status.mode === 'suspended' ? status.mode : 'enabled',
    startedAt: Number(status.startedAt) || 0,
    groups,
  };
}

function copyTold(a: ToldAgent): ToldAgent {
  return {
    serverId: String(a.serverId),
    name: String(a.name ?? ''),
    hostname: String(a.hostname ?? ''),
    toldAt: Number(a.toldAt) || 0,
    ...(Number.isFinite(a.backAt) ? { backAt: a.backAt as number } : {}),
    ...(typeof a.cameBackOn === 'string' ? { cameBackOn: a.cameBackOn } : {}),
  };
}

/** The stored document: a manifest like the others, its state under `status` (the platform's layout). */
export function rolloutDocument(state: RolloutState, name: string, kind: string): Record<string, unknown> {
  return { kind, version: 'v1', metadata: { name }, status: JSON.parse(JSON.stringify(state)) as unknown };
}

const refused = (message: string): GateError => new GateError(ErrorCodes.ROLLOUT_COMMAND_REFUSED, message);

export type RolloutCommand =
  | { verb: 'start-update'; group: string }
  | { verb: 'mark-done'; group: string }
  | { verb: 'rollback'; group?: string | undefined };

/**
 * An operator's command applied to the state (`gate-mux autoupdate agents ...`): `start-update`
 * starts an unstarted, halted or rolled back group at once (no window, previous group or wait);
 * `mark-done` makes a group done (the next may follow); `rollback` makes a group (every started one
 * when none is named) rolled back: its agents are answered the start version, to install now. Throws
 * GATE_ERR_ROLLOUT_COMMAND_REFUSED for a group that is not there or a state it cannot leave. Pure.
 */
export function applyCommand(state: RolloutState, command: RolloutCommand, who: string, now: number): RolloutState {
  const next: RolloutState = JSON.parse(JSON.stringify(state)) as RolloutState;
  const named = (name: string): GroupRollout => {
    const group = next.groups.find((g) => g.name === name);
    if (!group) throw refused(`no group ${name} in the rollout (groups: ${next.groups.map((g) => g.name).join(', ')})`);
    return group;
  };
  const set = (group: GroupRollout, to: GroupState, reason: string): void => {
    group.state = to;
    group.reason = reason;
    group.changedAt = now;
    if (to === 'done') group.doneAt = now;
  };
  switch (command.verb) {
    case 'start-update': {
      const group = named(command.group);
      if (group.state === 'canary' || group.state === 'active' || group.state === 'done')
        throw refused(`group ${group.name} is ${group.state} already`);
      // A fresh start: what was told before is forgotten, so the canaries are picked again.
      group.canaries = [];
      group.told = [];
      group.startNow = true;
      set(group, 'unstarted', `start requested by ${who}`);
      break;
    }
    case 'mark-done':
      set(named(command.group), 'done', `marked done by ${who}`);
      break;
    case 'rollback': {
      const groups = command.group === undefined ? next.groups.filter((g) => g.state !== 'unstarted') : [named(command.group)];
      if (groups.length === 0) throw refused('no group has started: nothing to roll back');
      for (const group of groups) set(group, 'rolledback', `rolled back by ${who}`);
      break;
    }
  }
  return next;
}

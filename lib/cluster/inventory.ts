import { checkLastUpdate, type AgentService, type LastUpdate } from '../tunnel/agent-description.js';
import type { DescribedAgent } from '../tunnel/registry.js';
import { serverIdForName } from '../tunnel/server-id.js';
import { DEFAULT_UPDATE_GROUP } from '../wire/names.js';
import type { FleetCounts } from './metrics.js';
import type { InventoryRecord, RouteStore } from './route-store.js';

/**
 * One agent of the fleet as `gate-mux inventory ls` shows it: what it said about itself, once
 * however many proxies hold its tunnels. The keys are the platform's (`server_id`, ...); empty
 * `hostname` and `version` and upgrader `unknown` mark an agent older than self-descriptions.
 */
export interface InventoryRow {
  server_id: string;
  hostname: string;
  services: AgentService[];
  version: string;
  upgrader: string;
  /** What its updater's latest install came to (`installed`, or `reverted` and why), when it reports one. */
  last_update?: LastUpdate;
  /** Its rollout group (`updater.group` of its agent.yaml; `default`). */
  update_group: string;
  /** The name its certificate carries. */
  agent: string;
  /** The proxies holding its tunnels now, sorted. */
  proxies: string[];
  /** When its oldest tunnel still up was admitted (ISO 8601). */
  since: string;
}

/** The upgrader shown for an agent that never said (older than self-descriptions). */
export const UNKNOWN_UPGRADER = 'unknown';

/**
 * The record a proxy writes for one of its agents. Its server ID is always the one the agent's
 * certificate name gives (the registry admits no description naming another): what an agent says
 * can never key a record to another agent's row.
 */
export function recordFor(agent: DescribedAgent, proxyId: string, generation: number): InventoryRecord {
  const d = agent.description;
  return {
    serverId: serverIdForName(agent.name),
    hostname: d?.hostname ?? '',
    services: d ? d.services.map((s) => ({ ...s })) : [],
    version: d?.version ?? '',
    upgrader: d?.upgrader ?? UNKNOWN_UPGRADER,
    ...(d?.lastUpdate ? { lastUpdate: { ...d.lastUpdate } } : {}),
    updateGroup: d?.updateGroup ?? DEFAULT_UPDATE_GROUP,
    agent: agent.name,
    proxyId,
    generation,
    since: agent.since,
  };
}

/** A record read back from a store, or undefined when it is not one this version writes. Pure. */
export function parseInventoryRecord(text: string): InventoryRecord | undefined {
  try {
    const v = JSON.parse(text) as Partial<InventoryRecord>;
    const strings = [v.serverId, v.hostname, v.version, v.upgrader, v.agent, v.proxyId];
    if (
      !strings.every((x) => typeof x === 'string') ||
      !Number.isFinite(v.generation) ||
      !Number.isFinite(v.since) ||
      !Array.isArray(v.services)
    )
      return undefined;
    const services = v.services
      .filter((s): s is AgentService => typeof s?.kind === 'string' && typeof s?.name === 'string')
      .map((s) => ({ kind: s.kind, name: s.name }));
    return {
      serverId: v.serverId!,
      hostname: v.hostname!,
      services,
      version: v.version!,
      upgrader: v.upgrader!,
      // Checked like the description it came from; a record that is not one is left out.
      ...(v.lastUpdate === undefined || !checkLastUpdate(v.lastUpdate) ? {} : { lastUpdate: checkLastUpdate(v.lastUpdate)! }),
      updateGroup: typeof v.updateGroup === 'string' ? v.updateGroup : DEFAULT_UPDATE_GROUP,
      agent: v.agent!,
      proxyId: v.proxyId!,
      generation: v.generation!,
      since: v.since!,
    };
  } catch {
    return undefined;
  }
}

/**
 * The rows of the fleet: records grouped by server ID (an agent with tunnels on two proxies is
 * one row), the description from its most recently admitted tunnel, sorted by hostname then
 * server ID. Pure.
 */
export function mergeInventory(records: readonly InventoryRecord[]): InventoryRow[] {
  const byServer = new Map<string, InventoryRecord[]>();
  for (const r of records) {
    const group = byServer.get(r.serverId);
    if (group) group.push(r);
    else byServer.set(r.serverId, [r]);
  }
  const rows: InventoryRow[] = [];
  for (const [serverId, group] of byServer) {
    const newest = group.reduce((a, b) => (b.since > a.since ? b : a));
    rows.push({
      server_id: serverId,
      hostname: newest.hostname,
      services: newest.services.map((s) => ({ ...s })),
      version: newest.version,
      upgrader: newest.upgrader,
      ...(newest.lastUpdate ? { last_update: { ...newest.lastUpdate } } : {}),
      update_group: newest.updateGroup,
      agent: newest.agent,
      proxies: [...new Set(group.map((r) => r.proxyId))].sort(),
      since: new Date(Math.min(...group.map((r) => r.since))).toISOString(),
    });
  }
  return rows.sort((a, b) => a.hostname.localeCompare(b.hostname) || a.server_id.localeCompare(b.server_id));
}

/** The whole cluster's fleet, from any proxy: every live proxy's records, one row per agent. */
export async function readInventory(store: RouteStore): Promise<InventoryRow[]> {
  return mergeInventory(await store.agentRecords());
}

/** This proxy's agents by version and upgrader, and its refusals by code, for /metrics. Pure. */
export function fleetCounts(agents: readonly DescribedAgent[], refused: Readonly<Record<string, number>>): FleetCounts {
  const counts: FleetCounts = { byVersion: {}, byUpgrader: {}, refused: { ...refused } };
  for (const agent of agents) {
    const version = agent.description?.version ?? '';
    const upgrader = agent.description?.upgrader ?? UNKNOWN_UPGRADER;
    counts.byVersion[version] = (counts.byVersion[version] ?? 0) + 1;
    counts.byUpgrader[upgrader] = (counts.byUpgrader[upgrader] ?? 0) + 1;
  }
  return counts;
}

/**
 * What `gate-mux autoupdate agents status` and `report` show: per group its state and why, its
 * agents counted by version, its canaries and how each is; and what each agent runs. Built from
 * the stored rollout and the cluster's inventory. Pure.
 */
import type { InventoryRow } from '../cluster/inventory.js';
import { DEFAULT_UPDATE_GROUP } from '../wire/names.js';
import type { RolloutState, ToldAgent } from './rollout-state.js';

export interface CanaryStatus {
  server_id: string;
  name: string;
  hostname: string;
  /** `updating` (told, not back), `back` (connected on the target), `came back on X`, or `offline`. */
  status: string;
  told_at: string;
}

export interface GroupStatus {
  name: string;
  state: string;
  reason: string;
  since: string;
  /** Connected agents of the group by the version they run. */
  versions: Record<string, number>;
  agents: number;
  canaries: CanaryStatus[];
  /** Told to update and not back on the target yet. */
  in_flight: number;
}

export interface RolloutStatus {
  managed: boolean;
  start_version?: string;
  target_version?: string;
  strategy?: string;
  mode?: string;
  started_at?: string;
  groups: GroupStatus[];
}

export interface AgentReportRow {
  server_id: string;
  name: string;
  hostname: string;
  group: string;
  version: string;
  connected: boolean;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The group of `row` in the rollout: its own when listed, else the last (as the controller reads it). */
function groupOf(state: RolloutState, group: string): string {
  return state.groups.some((g) => g.name === group) ? group : (state.groups.at(-1)?.name ?? DEFAULT_UPDATE_GROUP);
}

function canaryStatus(told: ToldAgent, rows: ReadonlyMap<string, InventoryRow>): CanaryStatus {
  const row = rows.get(told.serverId);
  const status =
    told.cameBackOn !== undefined
      ? `came back on ${told.cameBackOn}`
      : told.backAt !== undefined
        ? 'back'
        : row === undefined
          ? 'offline'
          : 'updating';
  return { server_id: told.serverId, name: told.name, hostname: told.hostname, status, told_at: iso(told.toldAt) };
}

export function rolloutStatus(state: RolloutState | undefined, inventory: readonly InventoryRow[]): RolloutStatus {
  if (!state || state.mode === 'disabled') return { managed: false, groups: [] };
  const rows = new Map(inventory.map((r) => [r.server_id, r]));
  return {
    managed: true,
    start_version: state.startVersion,
    target_version: state.targetVersion,
    strategy: state.strategy,
    mode: state.mode,
    started_at: iso(state.startedAt),
    groups: state.groups.map((g) => {
      const members = inventory.filter((r) => groupOf(state, r.update_group) === g.name);
      const versions: Record<string, number> = {};
      for (const m of members) versions[m.version || '-'] = (versions[m.version || '-'] ?? 0) + 1;
      return {
        name: g.name,
        state: g.state,
        reason: g.reason,
        since: iso(g.changedAt),
        versions,
        agents: members.length,
        canaries: g.canaries.map((c) => canaryStatus(c, rows)),
        in_flight: [...g.canaries, ...g.told].filter((a) => a.backAt === undefined && a.cameBackOn === undefined).length,
      };
    }),
  };
}

/** What each agent runs: the connected ones from the inventory, and those the rollout told that are not connected now. */
export function agentReport(state: RolloutState | undefined, inventory: readonly InventoryRow[]): AgentReportRow[] {
  const out: AgentReportRow[] = inventory.map((r) => ({
    server_id: r.server_id,
    name: r.agent,
    hostname: r.hostname,
    group: r.update_group,
    version: r.version,
    connected: true,
  }));
  const seen = new Set(out.map((r) => r.server_id));
  for (const g of state?.groups ?? [])
    for (const told of [...g.canaries, ...g.told])
      if (!seen.has(told.serverId)) {
        seen.add(told.serverId);
        out.push({ server_id: told.serverId, name: told.name, hostname: told.hostname, group: g.name, version: '', connected: false });
      }
  return out.sort(
    (a, b) => a.group.localeCompare(b.group) || a.hostname.localeCompare(b.hostname) || a.server_id.localeCompare(b.server_id),
  );
}

/** The text of `status`. */
export function formatRolloutStatus(status: RolloutStatus): string {
  if (!status.managed)
    return 'no managed rollout: the cluster has no autoupdate_config and autoupdate_version (or its mode is disabled); updaters follow their channel\n';
  const lines = [
    `rollout ${status.start_version} -> ${status.target_version} (${status.strategy}, mode ${status.mode}, since ${status.started_at})`,
  ];
  for (const g of status.groups) {
    const versions = Object.entries(g.versions)
      .map(([v, n]) => `${v}: ${n}`)
      .join(', ');
    lines.push(`group ${g.name}: ${g.state}${g.reason ? ` (${g.reason})` : ''}`);
    lines.push(`  agents: ${g.agents}${versions ? ` (${versions})` : ''}; in flight: ${g.in_flight}`);
    for (const c of g.canaries) lines.push(`  canary ${c.name || c.hostname || c.server_id} (${c.server_id}): ${c.status}`);
  }
  return `${lines.join('\n')}\n`;
}

/** The text of `report`. */
export function formatAgentReport(rows: readonly AgentReportRow[]): string {
  const head = ['Server ID', 'Name', 'Hostname', 'Group', 'Version', 'Connected'];
  const cells = rows.map((r) => [r.server_id, r.name || '-', r.hostname || '-', r.group, r.version || '-', r.connected ? 'yes' : 'no']);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: readonly string[]): string =>
    `${values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd()}\n`;
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('');
}

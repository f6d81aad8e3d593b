/**
 * `gate-mux autoupdate agents status|report|start-update|mark-done|rollback`: the cluster's managed
 * rollout of agent versions (docs/updates.md, "Rollouts"), through a proxy's admin endpoint like the
 * other admin commands. `status` and `report` read; the others change the rollout's state (the
 * `update` verb on autoupdate_agent_rollout).
 */
import { ErrorCodes, toGateError } from '../errors.js';
import { formatAgentReport, formatRolloutStatus, type AgentReportRow, type RolloutStatus } from '../admin/rollout-status.js';
import { adminCall, adminConnection, CONNECTION_OPTIONS, CONNECTION_USAGE, type ConnectionFlags } from './admin-client.js';
import { parseCommand, usageError } from './usage.js';

export const AUTOUPDATE_USAGE = `usage: gate-mux autoupdate agents status [--format text|json]
       gate-mux autoupdate agents report [--format text|json]
       gate-mux autoupdate agents start-update GROUP
       gate-mux autoupdate agents mark-done GROUP
       gate-mux autoupdate agents rollback [GROUP]
                                              [connection options]

status        each group of the rollout: its state (unstarted, canary, active, done, halted,
              rolledback) and why, its agents by version, its canaries and how each is
              (needs read on autoupdate_agent_rollout)
report        what each agent runs: server ID, name, hostname, group, version, connected
              (needs read on inventory)
start-update  start GROUP now: no waiting for its window, the previous group or its wait; a
              halted or rolled back group starts again with new canaries
mark-done     make GROUP done: the next group may follow
rollback      GROUP (every started group when none is named) back to the start version: its
              agents are told to install it now
              (the last three need update on autoupdate_agent_rollout)

  --format FORMAT     text (default) or json
${CONNECTION_USAGE}`;

export async function main(argv: string[]): Promise<number> {
  const [noun, verb, ...rest] = argv;
  if (noun === undefined || noun === '--help' || noun === '-h' || noun === 'help' || verb === '--help' || verb === '-h') {
    process.stdout.write(AUTOUPDATE_USAGE);
    return noun === undefined ? 2 : 0;
  }
  if (noun !== 'agents') return usageError(`gate-mux autoupdate: unknown subject '${noun}' (agents)`, AUTOUPDATE_USAGE);
  const parsed = parseCommand(
    {
      args: rest,
      options: { ...CONNECTION_OPTIONS, format: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: true,
    },
    AUTOUPDATE_USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(AUTOUPDATE_USAGE);
    return 0;
  }
  const format = values.format ?? 'text';
  if (format !== 'text' && format !== 'json') return usageError(`--format ${format}: expected text or json`, AUTOUPDATE_USAGE);
  const connection = (): ReturnType<typeof adminConnection> => adminConnection(values as ConnectionFlags);
  try {
    switch (verb) {
      case 'status': {
        if (positionals.length > 0) return usageError('gate-mux autoupdate agents status: no arguments', AUTOUPDATE_USAGE);
        const status = (await adminCall(await connection(), 'autoupdate/status')) as unknown as RolloutStatus;
        process.stdout.write(format === 'json' ? `${JSON.stringify(status, null, 2)}\n` : formatRolloutStatus(status));
        return 0;
      }
      case 'report': {
        if (positionals.length > 0) return usageError('gate-mux autoupdate agents report: no arguments', AUTOUPDATE_USAGE);
        const { agents } = (await adminCall(await connection(), 'autoupdate/report')) as unknown as { agents: AgentReportRow[] };
        process.stdout.write(format === 'json' ? `${JSON.stringify(agents, null, 2)}\n` : formatAgentReport(agents));
        return 0;
      }
      case 'start-update':
      case 'mark-done':
      case 'rollback': {
        const group = positionals[0];
        if (positionals.length > 1 || (verb !== 'rollback' && group === undefined))
          return usageError(
            `gate-mux autoupdate agents ${verb}: ${verb === 'rollback' ? 'at most one GROUP' : 'one GROUP'}`,
            AUTOUPDATE_USAGE,
          );
        const answer = await adminCall(await connection(), 'autoupdate/command', { verb, ...(group === undefined ? {} : { group }) });
        process.stdout.write(format === 'json' ? `${JSON.stringify(answer, null, 2)}\n` : `${answer.message as string}\n`);
        return 0;
      }
      default:
        return usageError(
          verb === undefined
            ? 'gate-mux autoupdate agents: which? (status, report, start-update, mark-done, rollback)'
            : `gate-mux autoupdate agents: unknown subcommand '${verb}'`,
          AUTOUPDATE_USAGE,
        );
    }
  } catch (err) {
    const error = toGateError(err, ErrorCodes.FETCH_FAILED);
    process.stderr.write(`gate-mux autoupdate agents ${verb}: ${error.code}: ${error.message}\n`);
    return 1;
  }
}

import { unwatchFile, watchFile } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../log.js';
import type { TunnelAgent } from '../tunnel/agent.js';
import { writeReadiness } from '../updater/agent-readiness.js';
import { LAST_UPDATE_FILE, readLastUpdate } from '../updater/last-update.js';

/** How often the agent looks at last-update.json (a stat; the updater writes it once per install). */
const LAST_UPDATE_POLL_MS = 2_000;

/**
 * The agent's side of the two files it shares with its updater in the state directory: it writes
 * `ready.json` (version, pid, tunnel up, when) whenever a tunnel comes up or goes down, and at its
 * stop, so `gate-upgrade run` can tell the new version came back; and it reads `last-update.json`
 * (what the updater's latest install came to) into its self-description, at start and whenever
 * the file changes, so the cluster sees an install that was reverted. Returns the stop function,
 * which writes `tunnelUp: false` last. Write failures are logged once each time, never fatal: the
 * tunnel matters more than the report.
 */
export function reportToUpdater(agent: TunnelAgent, stateDir: string, log: Logger): () => Promise<void> {
  let writes = Promise.resolve();
  const write = (tunnelUp: boolean): Promise<void> => {
    // One after the other: each write renames a whole file into place, and the last one must win.
    writes = writes.then(() =>
      writeReadiness(stateDir, { version: agent.description.version, pid: process.pid, tunnelUp, at: new Date().toISOString() }).catch(
        (err: unknown) => log.warn({ err, stateDir }, 'could not write ready.json for the updater'),
      ),
    );
    return writes;
  };
  const onChange = (): void => void write(agent.connected);
  agent.on('connected', onChange);
  agent.on('disconnected', onChange);
  void write(agent.connected);

  const path = join(stateDir, LAST_UPDATE_FILE);
  const load = (): void => {
    void readLastUpdate(stateDir).then((update) => agent.setLastUpdate(update));
  };
  load();
  watchFile(path, { interval: LAST_UPDATE_POLL_MS, persistent: false }, load);
  return async () => {
    unwatchFile(path, load);
    agent.off('connected', onChange);
    agent.off('disconnected', onChange);
    await write(false);
  };
}

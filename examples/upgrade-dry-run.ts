// What the updater beside an agent would do now, without doing it: ask the proxy's channel for the
// target version (through HTTPS_PROXY / NO_PROXY), compare it with the running version, and read
// the exported maintenance schedule.
//
//   npm run build && node dist/examples/upgrade-dry-run.js --proxy https://gate.example.com:443 \
//       [--channel stable/cloud] [--ca ca.pem] [--current 1.2.3] [--schedule schedule.yaml] [--critical]
//
// First line, exactly: `no upgrades available (1.2.3 == 1.2.3)` or
// `an upgrade is available (1.2.3 -> 1.2.4)`; then what the schedule allows. Warns on stderr when
// no valid schedule has been exported yet. Exits 0, or 1 with the error code on failure.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseMaintenanceConfig, type MaintenanceConfig } from '../lib/upgrade/maintenance-config.js';
import { maintenanceWindow } from '../lib/upgrade/maintenance-window.js';
import { compareVersions, formatVersion, parseVersion } from '../lib/upgrade/semver.js';
import { shouldUpgrade } from '../lib/upgrade/should-upgrade.js';
import { fetchTargetVersion } from '../lib/upgrade/target-version.js';

const { version: packageVersion } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const { values } = parseArgs({
  options: {
    proxy: { type: 'string' },
    channel: { type: 'string', default: 'default' },
    ca: { type: 'string' },
    current: { type: 'string', default: packageVersion },
    schedule: { type: 'string' },
    critical: { type: 'boolean', default: false },
    now: { type: 'string' },
  },
});

if (!values.proxy) {
  console.error('usage: upgrade-dry-run --proxy https://host:port [--channel name] [--ca file] [--current x.y.z] [--schedule file] [--critical]');
  process.exit(2);
}

async function readSchedule(path: string | undefined): Promise<MaintenanceConfig | undefined> {
  if (!path) {
    console.error('warning: no maintenance schedule has been exported yet (no --schedule): only critical updates would be applied');
    return undefined;
  }
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    console.error(`warning: no maintenance schedule has been exported yet (${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): only critical updates would be applied`);
    return undefined;
  }
  try {
    return parseMaintenanceConfig(text);
  } catch (err) {
    console.error(`warning: no valid maintenance schedule has been exported yet (${path}: ${(err as Error).message}): only critical updates would be applied`);
    return undefined;
  }
}

try {
  const current = formatVersion(parseVersion(values.current!));
  const now = values.now ? new Date(values.now) : new Date();
  const target = await fetchTargetVersion({
    proxy: values.proxy,
    channel: values.channel!,
    ...(values.ca ? { ca: readFileSync(values.ca) } : {}),
  });
  if (target === undefined) console.log(`no upgrades available (channel ${values.channel} offers none)`);
  else if (compareVersions(target, current) > 0) console.log(`an upgrade is available (${current} -> ${target})`);
  else console.log(`no upgrades available (${current} ${compareVersions(target, current) === 0 ? '==' : '>'} ${target})`);

  const schedule = await readSchedule(values.schedule);
  const decision = shouldUpgrade({ current, target, critical: values.critical, window: schedule, now });
  if (schedule) {
    const state = maintenanceWindow(schedule, now);
    console.log(state.inWindow ? `inside the maintenance window (started ${state.currentStart!.toISOString()})` : `next maintenance window starts ${state.nextStart.toISOString()}`);
  }
  if (decision.available) console.log(decision.upgrade ? `would upgrade now (${decision.reason})` : `would wait (${decision.reason})`);
} catch (err) {
  console.error(`upgrade-dry-run: ${(err as { code?: string }).code ?? 'error'}: ${(err as Error).message}`);
  process.exit(1);
}

import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import { formatMaintenanceConfig, parseMaintenanceConfig, type MaintenanceConfig } from '../../lib/updater/maintenance-config.js';
import { maintenanceWindow } from '../../lib/updater/maintenance-window.js';
import { shouldUpgrade } from '../../lib/updater/should-upgrade.js';

const doc = (agentUpgrades: string): string =>
  `kind: cluster_maintenance_config\nversion: v1\nmetadata:\n  name: cluster-maintenance-config\nspec:\n  agent_upgrades:\n${agentUpgrades}`;

t.test('parse: YAML and JSON, short and long names in any case, defaults', async (t) => {
  t.same(parseMaintenanceConfig(doc('    utc_start_hour: 2\n    weekdays: [Mon, wednesday, FRI, Monday]\n')), {
    utcStartHour: 2,
    weekdays: [1, 3, 5],
  });
  t.same(
    parseMaintenanceConfig(
      JSON.stringify({
        kind: 'cluster_maintenance_config',
        spec: { agent_upgrades: { utc_start_hour: 23, weekdays: ['sun', 'SATURDAY'] } },
      }),
    ),
    {
      utcStartHour: 23,
      weekdays: [0, 6],
    },
  );
  t.same(parseMaintenanceConfig(doc('    utc_start_hour: 0\n')).weekdays, [0, 1, 2, 3, 4, 5, 6], 'no weekdays: every day');
  t.same(parseMaintenanceConfig(doc('    utc_start_hour: 0\n    weekdays: []\n')).weekdays, [0, 1, 2, 3, 4, 5, 6], 'empty list: every day');
});

t.test('format: the document the proxy serves reads back as the same schedule', async (t) => {
  const text = formatMaintenanceConfig({ utcStartHour: 3, weekdays: [1, 5] });
  t.equal(text, 'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 3\n    weekdays: [Monday, Friday]\n');
  t.same(parseMaintenanceConfig(text), { utcStartHour: 3, weekdays: [1, 5] });
});

t.test('parse: every invalid field is named', async (t) => {
  const cases: Array<[string, RegExp]> = [
    [doc('    utc_start_hour: 24\n'), /^spec\.agent_upgrades\.utc_start_hour: must be an integer hour from 0 to 23, got 24/],
    [doc('    utc_start_hour: -1\n'), /^spec\.agent_upgrades\.utc_start_hour: .* got -1/],
    [doc('    utc_start_hour: 1.5\n'), /^spec\.agent_upgrades\.utc_start_hour: .* got 1\.5/],
    [doc('    utc_start_hour: "2"\n'), /^spec\.agent_upgrades\.utc_start_hour: .* got "2"/],
    [doc('    weekdays: [Mon]\n'), /^spec\.agent_upgrades\.utc_start_hour: required/],
    [doc('    utc_start_hour: 2\n    weekdays: [Mon, Funday]\n'), /^spec\.agent_upgrades\.weekdays\[1\]: "Funday" is not a day name/],
    [doc('    utc_start_hour: 2\n    weekdays: [Mo]\n'), /^spec\.agent_upgrades\.weekdays\[0\]: "Mo"/],
    [doc('    utc_start_hour: 2\n    weekdays: [1]\n'), /^spec\.agent_upgrades\.weekdays\[0\]: 1 is not/],
    [doc('    utc_start_hour: 2\n    weekdays: Mon\n'), /^spec\.agent_upgrades\.weekdays: must be a list/],
    [doc('    utc_start_hour: 2\n    start_hour: 3\n'), /^spec\.agent_upgrades\.start_hour: unknown field/],
    ['kind: cluster_networking_config\nspec: {}\n', /^kind: expected cluster_maintenance_config/],
    ['kind: cluster_maintenance_config\nspec: {}\n', /^spec\.agent_upgrades: missing/],
    ['kind: cluster_maintenance_config\n', /^spec: missing/],
    ['spec:\n  agent_upgrades:\n    utc_start_hour: 2\n', /^kind: required: cluster_maintenance_config/],
    ['[1, 2]', /^\(document\): expected/],
    ['{"spec": ', /^not YAML or JSON/],
  ];
  for (const [text, message] of cases)
    t.throws(() => parseMaintenanceConfig(text), { code: ErrorCodes.UPGRADE_SCHEDULE_INVALID, message }, String(message));
});

const at = (iso: string): Date => new Date(iso);
const cfg = (utcStartHour: number, weekdays: MaintenanceConfig['weekdays']): MaintenanceConfig => ({ utcStartHour, weekdays });
const ALL: MaintenanceConfig['weekdays'] = [0, 1, 2, 3, 4, 5, 6];

t.test('window arithmetic: midnight, weekday and week boundaries', async (t) => {
  // 2026-08-02 is a Sunday; 2026-08-03 a Monday.
  const cases: Array<[string, MaintenanceConfig, string, boolean, string]> = [
    ['inside, first instant', cfg(2, [0]), '2026-08-02T02:00:00.000Z', true, '2026-08-09T02:00:00.000Z'],
    ['inside, last millisecond', cfg(2, [0]), '2026-08-02T02:59:59.999Z', true, '2026-08-09T02:00:00.000Z'],
    ['end is exclusive', cfg(2, [0]), '2026-08-02T03:00:00.000Z', false, '2026-08-09T02:00:00.000Z'],
    ["before today's window", cfg(2, [0]), '2026-08-02T01:59:59.999Z', false, '2026-08-02T02:00:00.000Z'],
    ['23:00 window runs to midnight', cfg(23, [0]), '2026-08-02T23:30:00.000Z', true, '2026-08-09T23:00:00.000Z'],
    ['midnight after a 23:00 window is outside it', cfg(23, [0]), '2026-08-03T00:00:00.000Z', false, '2026-08-09T23:00:00.000Z'],
    ['next start across midnight', cfg(1, ALL), '2026-08-02T23:30:00.000Z', false, '2026-08-03T01:00:00.000Z'],
    ['hour 0 on Monday, seen from Sunday night', cfg(0, [1]), '2026-08-02T23:59:00.000Z', false, '2026-08-03T00:00:00.000Z'],
    ['Sunday -> Monday: Saturday night waits for Monday', cfg(4, [1]), '2026-08-01T23:00:00.000Z', false, '2026-08-03T04:00:00.000Z'],
    ["Saturday -> next week's Saturday", cfg(5, [6]), '2026-08-01T06:00:00.000Z', false, '2026-08-08T05:00:00.000Z'],
    ['every day, inside', cfg(12, ALL), '2026-08-05T12:15:00.000Z', true, '2026-08-06T12:00:00.000Z'],
    ['every day, just after', cfg(12, ALL), '2026-08-05T13:00:00.000Z', false, '2026-08-06T12:00:00.000Z'],
    ['month end', cfg(3, [2]), '2026-08-31T04:00:00.000Z', false, '2026-09-01T03:00:00.000Z'],
    ['year end', cfg(0, [5]), '2026-12-31T12:00:00.000Z', false, '2027-01-01T00:00:00.000Z'],
    ['leap day', cfg(6, [0]), '2028-02-27T07:00:00.000Z', false, '2028-03-05T06:00:00.000Z'],
    ['weekday listed but hour passed: next listed day', cfg(8, [2, 4]), '2026-08-04T09:00:00.000Z', false, '2026-08-06T08:00:00.000Z'],
  ];
  for (const [name, config, now, inWindow, next] of cases) {
    const state = maintenanceWindow(config, at(now));
    t.equal(state.inWindow, inWindow, `${name}: inWindow`);
    t.equal(state.nextStart.toISOString(), next, `${name}: nextStart`);
    if (inWindow) t.equal(state.currentStart!.getUTCHours(), config.utcStartHour, `${name}: current window start`);
  }
});

t.test('shouldUpgrade: equality with the served version, window unless critical, never without a schedule', async (t) => {
  const sundays2am = cfg(2, [0]);
  const inside = at('2026-08-02T02:30:00Z');
  const outside = at('2026-08-02T05:00:00Z');
  const ask = (current: string, target: string | undefined, critical: boolean, window: MaintenanceConfig | undefined, now: Date) =>
    shouldUpgrade({ current, target, critical, window, now });
  t.match(ask('v1.2.3', '1.2.3', false, sundays2am, inside), { upgrade: false, reason: 'up-to-date', available: false });
  t.match(
    ask('1.2.4', 'v1.2.3', false, sundays2am, inside),
    { upgrade: false, reason: 'downgrade-refused', available: true, downgrade: true, target: '1.2.3' },
    'a lower target is refused by default',
  );
  t.match(
    ask('1.2.4', 'v1.2.3', true, sundays2am, outside),
    { upgrade: false, reason: 'downgrade-refused', downgrade: true },
    'critical or not',
  );
  t.match(
    shouldUpgrade({ current: '1.2.4', target: '1.2.3', window: sundays2am, now: inside, allowDowngrade: true }),
    { upgrade: true, reason: 'in-window', available: true, downgrade: true, target: '1.2.3' },
    'allowDowngrade: true follows the cluster down',
  );
  t.match(
    shouldUpgrade({ current: '1.2.4', target: '1.2.3', window: sundays2am, now: outside, allowDowngrade: true }),
    { upgrade: false, reason: 'outside-window', downgrade: true },
    'a downgrade waits for the window too',
  );
  t.match(
    shouldUpgrade({ current: '1.2.4', target: '1.2.3', critical: true, window: sundays2am, now: outside, allowDowngrade: true }),
    { upgrade: true, reason: 'critical', downgrade: true },
    'an allowed critical downgrade does not wait',
  );
  t.match(
    shouldUpgrade({ current: '1.2.3', target: '1.2.4', window: sundays2am, now: inside, allowDowngrade: false }),
    { upgrade: true, reason: 'in-window', downgrade: false },
    'allowDowngrade: false does not stop an upgrade',
  );
  // Build metadata: same precedence (SemVer §10), so the same version; a rebuild is not reinstalled.
  t.match(ask('1.2.3+build.4', 'v1.2.3+build.5', true, sundays2am, inside), {
    upgrade: false,
    reason: 'up-to-date',
    available: false,
    target: '1.2.3',
  });
  t.match(
    ask('1.2.3+build.4', '1.2.4+build.4', false, sundays2am, inside),
    { upgrade: true, target: '1.2.4' },
    'the version part still counts',
  );
  t.match(ask('1.2.3', undefined, true, sundays2am, inside), { upgrade: false, reason: 'no-target' });
  t.match(ask('1.2.3', 'v1.2.4', false, sundays2am, inside), { upgrade: true, reason: 'in-window', target: '1.2.4' });
  const waiting = ask('1.2.3', '1.2.4', false, sundays2am, outside);
  t.match(waiting, { upgrade: false, reason: 'outside-window', available: true });
  t.equal(waiting.nextStart?.toISOString(), '2026-08-09T02:00:00.000Z');
  t.match(ask('1.2.3', '1.2.4', true, sundays2am, outside), { upgrade: true, reason: 'critical' }, 'critical ignores the window');
  t.match(ask('1.2.3', '1.2.4', true, undefined, outside), { upgrade: true, reason: 'critical' });
  t.match(ask('1.2.3', '1.2.4', false, undefined, inside), { upgrade: false, reason: 'no-schedule', available: true });
  t.match(ask('1.2.3-rc.1', '1.2.3', false, sundays2am, inside), { upgrade: true }, 'a release after its pre-release');
});

// A schedule rewritten in place may be read half written. Every torn state of such a write (the
// new bytes up to some offset over the old file, before and after the cut to length) reads as the
// old schedule, the new one, or "no valid schedule" with a warning: never as a window nobody set.
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseMaintenanceConfig } from '../../lib/updater/maintenance-config.js';
import { readSchedule } from '../../lib/updater/schedule.js';
import { sealSchedule, unsealSchedule } from '../../lib/updater/schedule-seal.js';
import { tempDir } from '../helpers/temp-dir.js';

const doc = (hour: number, days: string): string =>
  `kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: ${hour}\n    weekdays: [${days}]\n`;

t.test('seal and unseal', async (t) => {
  const body = doc(2, 'Sunday');
  t.equal(unsealSchedule(sealSchedule(body)), body);
  t.match(sealSchedule(body), /^# gate-upgrade checksum sha256:[0-9a-f]{64}\n/);
  t.equal(unsealSchedule(body), body, 'a file without the line (by hand, or older) is read as it is');
  t.match(unsealSchedule(sealSchedule(body).replace('utc_start_hour: 2', 'utc_start_hour: 3')), /checksum does not match/);
  t.match(unsealSchedule(sealSchedule(body).slice(0, 40)), /checksum does not match/);
});

t.test('every torn state of an in-place rewrite reads as old, new or none', async (t) => {
  const dir = await tempDir(t, 'torn');
  const path = join(dir, 'schedule');
  const pairs: Array<[string, string]> = [
    [doc(2, 'Sunday'), doc(3, 'Monday')],
    [doc(2, 'Sunday, Monday, Tuesday'), doc(23, 'Sat')],
    [doc(23, 'Sat'), doc(2, 'Sunday, Monday, Tuesday')],
  ];
  let torn = 0;
  for (const [oldBody, newBody] of pairs) {
    const oldText = sealSchedule(oldBody);
    const newText = sealSchedule(newBody);
    const allowed = new Set([oldBody, newBody].map((b) => JSON.stringify(parseMaintenanceConfig(b))));
    for (let k = 0; k <= newText.length; k++) {
      // Written up to k; the old tail still there (the cut comes last).
      const states = [newText.slice(0, k) + oldText.slice(k)];
      if (k === newText.length) states.push(newText);
      for (const state of states) {
        await writeFile(path, state);
        const { schedule, warning } = await readSchedule(path);
        if (schedule === undefined) {
          t.ok(warning, 'no schedule comes with a warning');
          torn++;
          continue;
        }
        if (!allowed.has(JSON.stringify(schedule))) t.fail(`a window nobody set, at offset ${k}: ${JSON.stringify(state)}`);
      }
    }
  }
  t.ok(torn > 0, `${torn} torn states read as "no valid schedule"`);
});

// The two files an agent shares with its updater in its state directory: ready.json (the agent's
// readiness, which the updater's health check waits for) and last-update.json (the updater's
// outcome, which the agent reports to the cluster). Real files in a temp dir, real processes for
// the pid check.
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  notReadyBecause,
  parseReadiness,
  processAlive,
  readReadiness,
  waitReady,
  writeReadiness,
} from '../../lib/updater/agent-readiness.js';
import {
  checkLastUpdate,
  LAST_UPDATE_FILE,
  MAX_LAST_UPDATE_REASON,
  readLastUpdate,
  writeLastUpdate,
} from '../../lib/updater/last-update.js';
import { readDescription, descriptionLine } from '../../lib/tunnel/agent-description.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { tempDir } from '../helpers/temp-dir.js';

const AT = '2026-11-27T17:00:00.000Z';

t.test('last-update: checked, bounded, written and read back', async (t) => {
  const good = { from: '1.2.3', to: '1.3.0', outcome: 'reverted', reason: 'not ready on 1.3.0', at: AT } as const;
  t.same(checkLastUpdate(good), good);
  t.same(checkLastUpdate({ ...good, from: 'v1.2.3', at: '2026-11-27T17:00:00Z' }), good, 'normalised');
  t.equal(checkLastUpdate({ ...good, outcome: 'maybe' }), undefined, 'unknown outcome');
  t.equal(checkLastUpdate({ ...good, to: 'latest' }), undefined, 'not a version');
  t.equal(checkLastUpdate({ ...good, at: 'yesterday' }), undefined, 'not a time');
  t.equal(checkLastUpdate([good]), undefined, 'not an object');
  const long = checkLastUpdate({ ...good, reason: `line one\nline two ${'x'.repeat(1000)}` })!;
  t.equal(long.reason.length, MAX_LAST_UPDATE_REASON, 'cut');
  t.notMatch(long.reason, '\n', 'one line');

  const dir = await tempDir(t, 'last-update');
  t.equal(await readLastUpdate(dir), undefined, 'absent');
  await writeLastUpdate(dir, good);
  t.same(await readLastUpdate(dir), good, 'read back');
  await writeFile(join(dir, LAST_UPDATE_FILE), JSON.stringify({ ...good, reason: 'x'.repeat(2000) }));
  t.equal(await readLastUpdate(dir), undefined, 'a file over the bound is not read');
  await t.rejects(writeLastUpdate(dir, { ...good, from: 'nope' }), TypeError);
});

t.test('the description carries lastUpdate; the proxy checks it like the rest', async (t) => {
  const base = { serverId: serverIdForName('a1'), hostname: 'h', services: [], version: '1.2.3', upgrader: 'unit', updateGroup: 'dev' };
  const lastUpdate = { from: '1.2.3', to: '1.3.0', outcome: 'reverted' as const, reason: 'not ready', at: AT };
  const round = readDescription(descriptionLine({ ...base, lastUpdate }));
  t.same(round.description.lastUpdate, lastUpdate, 'carried');
  t.same(round.sanitised, []);
  t.equal('lastUpdate' in readDescription(descriptionLine(base)).description, false, 'absent when the updater never ran');
  const bad = readDescription(JSON.stringify({ ...base, lastUpdate: { ...lastUpdate, outcome: 'exploded' } }));
  t.equal(bad.description.lastUpdate, undefined, 'a record that is not one is left out, not refused');
  t.same(bad.sanitised, ['lastUpdate'], 'and said so');
});

t.test('readiness: parsed, written, and what is not ready', async (t) => {
  const ready = { version: '1.3.0', pid: process.pid, tunnelUp: true, at: AT };
  t.same(parseReadiness(JSON.stringify(ready)), ready);
  t.equal(parseReadiness('{"version":"1.3.0","pid":-1,"tunnelUp":true,"at":"x"}'), undefined);
  t.equal(parseReadiness('nope'), undefined);
  t.equal(notReadyBecause(ready, '1.3.0'), undefined, 'this process: alive, tunnel up, that version');
  t.match(notReadyBecause(ready, '1.4.0'), /reports version 1\.3\.0, not 1\.4\.0/);
  t.match(notReadyBecause({ ...ready, tunnelUp: false }, '1.3.0'), /no tunnel up/);
  t.match(notReadyBecause(undefined, '1.3.0'), /no readiness file/);

  // A pid that existed and is gone: a crashed agent's record cannot pass for a ready one.
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await once(child, 'exit');
  t.equal(processAlive(child.pid!), false);
  t.match(notReadyBecause({ ...ready, pid: child.pid! }, '1.3.0'), /is not running/);

  const dir = await tempDir(t, 'readiness');
  t.match(await waitReady(dir, '1.3.0', { timeoutMs: 100, pollMs: 20 }), /no readiness file/, 'bounded: gives up with the reason');
  setTimeout(() => void writeReadiness(dir, ready), 50);
  t.equal(await waitReady(dir, '1.3.0', { timeoutMs: 10_000, pollMs: 20 }), undefined, 'ready once the file says so');
  t.same(await readReadiness(dir), ready);
});

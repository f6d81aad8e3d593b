// examples/upgrade-dry-run.js (a thin wrapper over `gate-upgrade dry-run`, whose own test is
// test/cli/gate-upgrade.test.ts) run as a user would, against a real GateProxy started here with a
// static channel (its certificates from a development CA in a temp dir).
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCodes } from '../../lib/errors.js';
import { fetchCritical, fetchTargetVersion } from '../../lib/updater/target-version.js';
import { startGateProxy } from '../helpers/gate-proxy.js';

const dir = await mkdtemp(join(tmpdir(), 'gate-upgrade-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
const gate = await startGateProxy(t, {
  mode: 'multiplex',
  upstreams: {},
  version: '1.2.3',
  proxyService: { automatic_upgrades_channels: { 'stable/cloud': { static_version: 'v1.2.4' } } },
});
const url = `https://${gate.address('multiplex')}`;
const caFile = gate.caFile;

const example = fileURLToPath(new URL('../../examples/upgrade-dry-run.js', import.meta.url));
function dryRun(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [example, '--proxy', url, '--ca', caFile, ...args], {
      env: { PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const schedule = join(dir, 'schedule.yaml');
await writeFile(schedule, 'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 2\n    weekdays: [Sun]\n');
const badSchedule = join(dir, 'bad-schedule.yaml');
await writeFile(badSchedule, 'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 25\n');

t.test('fetchTargetVersion strips the v; unknown and bad channels fail with a code', async (t) => {
  const ca = await import('node:fs/promises').then((fs) => fs.readFile(caFile));
  t.equal(await fetchTargetVersion({ proxy: url, ca, env: {} }), '1.2.3', 'default serves the proxy version');
  t.equal(await fetchTargetVersion({ proxy: url, channel: 'stable/cloud', ca, env: {} }), '1.2.4');
  await t.rejects(fetchTargetVersion({ proxy: url, channel: 'beta', ca, env: {} }), {
    code: ErrorCodes.UPGRADE_CHANNEL,
    message: /HTTP 404: no channel named "beta"/,
  });
  await t.rejects(fetchTargetVersion({ proxy: url, channel: '../x', ca, env: {} }), { code: ErrorCodes.UPGRADE_CHANNEL });
});

t.test('same version: no upgrades available, and a warning without a schedule', async (t) => {
  const r = await dryRun(['--current', '1.2.3', '--schedule', join(dir, 'none.yaml')]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout.split('\n')[0], 'no upgrades available (1.2.3 == 1.2.3)');
  t.match(r.stderr, /^warning: no maintenance schedule has been exported yet/);
});

t.test('stable/cloud offers more: an upgrade is available; the schedule says when', async (t) => {
  const r = await dryRun(['--channel', 'stable/cloud', '--current', 'v1.2.3', '--schedule', schedule, '--now', '2026-08-02T05:00:00Z']);
  t.equal(r.code, 0, r.stderr);
  t.same(r.stdout.trim().split('\n'), [
    'an upgrade is available (1.2.3 -> 1.2.4)',
    'next maintenance window starts 2026-08-09T02:00:00.000Z',
    'would wait (outside-window)',
  ]);
  t.equal(r.stderr, '', 'a valid schedule: no warning');
});

t.test('an invalid schedule is warned about, naming the field; errors exit 1 with their code', async (t) => {
  const r = await dryRun(['--channel', 'stable/cloud', '--current', '1.2.3', '--schedule', badSchedule]);
  t.equal(r.code, 0);
  t.match(r.stderr, /warning: no valid maintenance schedule has been exported yet .*spec\.agent_upgrades\.utc_start_hour/);
  t.match(r.stdout, /would wait \(no-schedule\)/);
  const missing = await dryRun(['--channel', 'nope', '--schedule', schedule]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /GATE_ERR_UPGRADE_CHANNEL/);
});

t.test('a channel answering none or garbage (plain HTTP server standing in for a forwarded channel)', async (t) => {
  const { createServer } = await import('node:http');
  const answers: Record<string, string> = {
    '/v1/webapi/automaticupgrades/channel/quiet/version': 'none\n',
    '/v1/webapi/automaticupgrades/channel/noisy/version': '<html>',
  };
  const server = createServer((req, res) => res.end(answers[req.url ?? ''] ?? ''));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  await t.rejects(
    fetchTargetVersion({ proxy: base, channel: 'quiet', env: {} }),
    { code: ErrorCodes.UPGRADE_INSECURE },
    'http only when allowed',
  );
  t.equal(await fetchTargetVersion({ proxy: base, channel: 'quiet', env: {}, allowHttp: true }), undefined);
  await t.rejects(fetchTargetVersion({ proxy: base, channel: 'noisy', env: {}, allowHttp: true }), {
    code: ErrorCodes.UPGRADE_CHANNEL,
    message: /"<html>", not a version/,
  });
  await t.rejects(fetchCritical({ proxy: base, channel: 'quiet', env: {}, allowHttp: true }), {
    code: ErrorCodes.UPGRADE_CHANNEL,
    message: /answered "" to critical, not yes or no/,
  });
});

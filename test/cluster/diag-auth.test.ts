// The diagnostics listener off loopback needs a key (issue 37): `diag_addr: 0.0.0.0:…` without
// `diag_token_file` is refused; with a token, /metrics and /v1/inventory answer 401
// GATE_ERR_DIAG_UNAUTHORIZED without it (probes stay open), on a real proxy; a reload changes the
// token in place; `gate-mux inventory ls` sends it.
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { parseConfig } from '../../lib/config/load.js';
import { ErrorCodes } from '../../lib/errors.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { run } from '../helpers/net.js';
import { GATE_MUX } from '../helpers/proxy-command.js';
import { tempDir } from '../helpers/temp-dir.js';

const TOKEN = 'diag-token-0123456789abcdef';

function get(port: number, path: string, authorization?: string): Promise<{ status: number; body: string; challenge: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, agent: false, headers: authorization ? { Authorization: authorization } : {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, challenge: res.headers['www-authenticate'] }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

t.test('a diag_addr off loopback needs diag_token_file', async (t) => {
  t.throws(
    () => parseConfig('diag_addr: 0.0.0.0:3000\n'),
    /diag_addr: 0\.0\.0\.0:3000 is not a loopback address: set diag_token_file .*or use e\.g\. 127\.0\.0\.1:3000/,
  );
  t.throws(() => parseConfig('diag_addr: "[::]:3000"\n'), /not a loopback address/);
  t.throws(() => parseConfig('diag_addr: 10.1.2.3:3000\n'), /not a loopback address/);
  t.throws(() => parseConfig('diag_addr: metrics.internal:3000\n'), /not a loopback address/);
  t.equal(parseConfig('diag_addr: 0.0.0.0:3000\ndiag_token_file: /etc/gate/diag-token\n').config.diagTokenFile, '/etc/gate/diag-token');
  for (const local of ['127.0.0.1:3000', '127.0.0.2:3000', '"[::1]:3000"', 'localhost:3000']) {
    t.ok(parseConfig(`diag_addr: ${local}\n`).config.diagAddr, `${local} needs no token`);
  }
});

t.test('with a token: /metrics and /v1/inventory need it, probes do not; reload and the CLI', async (t) => {
  const dir = await tempDir(t, 'diag-auth');
  const tokenFile = join(dir, 'diag-token');
  await writeFile(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  const gate = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, top: { diag_addr: '127.0.0.1:0', diag_token_file: tokenFile } });
  const port = gate.proxy.diagAddress!.port;

  for (const path of ['/metrics', '/v1/inventory']) {
    const bare = await get(port, path);
    t.equal(bare.status, 401, `${path} without the token`);
    t.equal(JSON.parse(bare.body).code, ErrorCodes.DIAG_UNAUTHORIZED);
    t.match(bare.challenge, /^Bearer /, 'with a Bearer challenge');
    t.equal((await get(port, path, 'Bearer not-the-token-at-all')).status, 401, `${path} with another token`);
    t.equal((await get(port, path, `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`)).status, 401, `${path} with Basic`);
    t.equal((await get(port, path, `Bearer ${TOKEN}`)).status, 200, `${path} with the token`);
  }
  t.match((await get(port, '/metrics', `Bearer ${TOKEN}`)).body, /gate_mux_/, 'the metrics themselves');
  t.equal((await get(port, '/healthz')).status, 200, '/healthz stays open (load balancer probes)');
  t.equal((await get(port, '/readyz')).status, 200, '/readyz too');

  const cli = await run(process.execPath, [GATE_MUX, 'inventory', 'ls', '--diag', `127.0.0.1:${port}`, '--token-file', tokenFile]);
  t.equal(cli.code, 0, cli.stderr);
  t.match(cli.stdout, /^Server ID/, 'gate-mux inventory ls --token-file lists');
  const refused = await run(process.execPath, [GATE_MUX, 'inventory', 'ls', '--diag', `127.0.0.1:${port}`]);
  t.equal(refused.code, 1);
  t.match(refused.stderr, /401 GATE_ERR_DIAG_UNAUTHORIZED/, 'and without it says why');

  // A reload with a new token: the same listener asks for the new one.
  const next = 'diag-token-rotated-9876543210';
  await writeFile(tokenFile, `${next}\n`);
  const doc = parseYaml(gate.yaml) as Record<string, unknown>;
  await gate.proxy.reload(parseConfig(stringify({ ...doc, diag_addr: '127.0.0.1:0' }), { source: 'reload' }).config);
  t.equal(gate.proxy.diagAddress!.port, port, 'the same listener');
  t.equal((await get(port, '/metrics', `Bearer ${TOKEN}`)).status, 401, 'the old token no longer');
  t.equal((await get(port, '/metrics', `Bearer ${next}`)).status, 200, 'the new one');
});

t.test('a token file that is short or missing refuses the start', async (t) => {
  const dir = await tempDir(t, 'diag-auth-short');
  const short = join(dir, 'short');
  await writeFile(short, 'abc\n');
  await t.rejects(startGateProxy(t, { mode: 'multiplex', upstreams: {}, top: { diag_addr: '127.0.0.1:0', diag_token_file: short } }), {
    code: ErrorCodes.CONFIG_INVALID,
    message: /must hold one token of at least 16 characters/,
  });
  await t.rejects(
    startGateProxy(t, { mode: 'multiplex', upstreams: {}, top: { diag_addr: '127.0.0.1:0', diag_token_file: join(dir, 'absent') } }),
    { code: ErrorCodes.CONFIG_INVALID, message: /diag_token_file: cannot read/ },
  );
});

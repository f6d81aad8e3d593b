// examples/proxy.ts, the proxy in the fewest lines of the library, run as a user would.
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requirePeer } from '../helpers/peers.js';
import { readUntil, run } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';

const EXAMPLE = fileURLToPath(new URL('../../examples/proxy.js', import.meta.url));

t.test('examples/proxy starts from a configuration, answers /webapi/ping, exits 0 on SIGTERM', async (t) => {
  const curl = requirePeer(t, 'curl', 'curl');
  if (!curl) return;
  const dir = await tempDir(t, 'example');
  const config = join(dir, 'gate.yaml');
  writeFileSync(config, `version: v3\ndata_dir: ${join(dir, 'data')}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n`);
  const child = spawn(process.execPath, [EXAMPLE, config], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let output = '';
  child.stderr.on('data', (d) => (output += d));
  const started = await readUntil(child.stdout, (s) => s.includes('development CA:'));
  child.stdout.resume();
  const port = /listening on 127\.0\.0\.1:(\d+) \(multiplex\)/.exec(started)?.[1];
  t.ok(port, started);
  const ping = await run(curl, ['-sS', '--cacert', join(dir, 'data', 'ca.pem'), `https://127.0.0.1:${port}/webapi/ping`]);
  t.equal(ping.code, 0, ping.stderr);
  t.match(JSON.parse(ping.stdout), { server_version: '0.0.0-example', proxy: { tls_routing_enabled: true } });
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  t.same(await exited, [0, null], `exits 0 (${output})`);
});

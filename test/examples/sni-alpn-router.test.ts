import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { requirePeer } from '../helpers/peers.js';
import { readUntil, run } from '../helpers/net.js';

// The README's first example, run as a user would: its own printed openssl commands must reach
// upstream A by SNI, upstream B by ALPN, and get an alert otherwise.
const EXAMPLE = fileURLToPath(new URL('../../examples/sni-alpn-router.js', import.meta.url));

t.test('examples/sni-alpn-router routes by SNI and by ALPN to two upstreams', async (t) => {
  const openssl = requirePeer(t, 'openssl', 'openssl');
  if (!openssl) return;
  const child = spawn(process.execPath, [EXAMPLE, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const banner = await readUntil(child.stdout!, (s) => s.includes('unrecognized name'));
  const port = /routing on 127\.0\.0\.1:(\d+)/.exec(banner)?.[1];
  t.ok(port, 'prints where it listens');
  const client = (args: string[]) =>
    run(openssl, ['s_client', '-connect', `127.0.0.1:${port}`, ...args, '-quiet', '-no_ign_eof'], {
      closeStdinWhen: (out) => out.includes('\n'),
    });
  t.match((await client(['-servername', 'a.gate.test'])).stdout, /^upstream A: sni=a\.gate\.test/);
  t.match((await client(['-alpn', 'h2,gate-postgres'])).stdout, /^upstream B: sni=- alpn=gate-postgres/);
  const refused = await run(openssl, ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'other.test'], { input: '' });
  t.match(refused.stdout + refused.stderr, /unrecognized name/);
  child.kill('SIGINT');
  await once(child, 'exit');
});

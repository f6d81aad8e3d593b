// The tunnel suites again with agents that offer HTTP/2 alone, as agents of releases before the
// framing do: a proxy of this release must serve both, so both stay tested. Each suite runs in its
// own process, as tap runs it, with GATE_TEST_TUNNEL_PROTOCOL=http2 (test/helpers/tunnel-protocol.ts).
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SUITES = ['tunnel.test.js', 'early-close.test.js'];

for (const suite of SUITES) {
  t.test(`${suite} on HTTP/2`, async (t) => {
    const file = fileURLToPath(new URL(suite, import.meta.url));
    const child = spawn(process.execPath, [file], {
      env: { ...process.env, GATE_TEST_TUNNEL_PROTOCOL: 'http2', TAP: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    const failed = output.split('\n').filter((line) => /^\s*not ok /.test(line));
    t.same(failed, [], 'no test failed');
    t.equal(code, 0, `the suite passed on HTTP/2${code === 0 ? '' : `:\n${output.slice(-4000)}`}`);
    t.match(output, /^\s*ok \d+/m, 'the suite ran its tests');
  });
}

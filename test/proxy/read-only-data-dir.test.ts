// A data_dir provisioned in advance on a read-only mount (a secret: the CA and, if used, the
// development token) starts the proxy: nothing is written or chmod-ed when it is already right
// (issue 37: a chmod of ca-key.pem failed with EROFS). A write that is really needed fails with a
// message that says what to provision. The read-only mount is a bind mount in a private mount
// namespace (`unshare -m`) that only the child proxy sees and that vanishes with it: nothing on
// the machine changes; where namespaces are not allowed the test is skipped.
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { chmod, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { tempDir } from '../helpers/temp-dir.js';

const canUnshare = spawnSync('unshare', ['-m', '--propagation', 'private', 'true']).status === 0;

/** Starts a proxy on `dataDir` mounted read-only, pings nothing, closes; its exit code and output. */
function startReadOnly(dataDir: string, auth: Record<string, unknown> = {}): { status: number | null; out: string } {
  const yaml = stringify({
    version: 'v3',
    data_dir: dataDir,
    auth_service: auth,
    proxy_service: { web_listen_addr: '127.0.0.1:0', public_addr: 'localhost', upstreams: {} },
  });
  const script = `
    const { parseConfig } = await import(${JSON.stringify(new URL('../../lib/config/load.js', import.meta.url).href)});
    const { GateProxy } = await import(${JSON.stringify(new URL('../../lib/proxy/gate-proxy.js', import.meta.url).href)});
    const { config } = parseConfig(${JSON.stringify(yaml)});
    try {
      const proxy = await GateProxy.start({ config, version: '0.0.1', env: {} });
      console.log('started on', proxy.listening[0].port);
      await proxy.close({ graceMs: 0 });
    } catch (err) {
      console.log('refused:', err.code, err.message);
      process.exitCode = 3;
    }`;
  const shell = `mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && exec node --input-type=module -e "$2"`;
  const run = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', shell, 'sh', dataDir, script], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: run.status, out: `${run.stdout}${run.stderr}` };
}

/** A data_dir made by a proxy's first start (CA, development token), then closed. */
async function provisioned(t: Test, prefix: string): Promise<string> {
  const dataDir = await tempDir(t, prefix);
  const gate = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir });
  await gate.proxy.close({ graceMs: 0 });
  return dataDir;
}

t.test('a provisioned read-only data_dir', { skip: canUnshare ? false : 'no private mount namespace here (unshare -m)' }, async (t) => {
  t.test('starts, with the development token provisioned', async (t) => {
    const dataDir = await provisioned(t, 'ro-provisioned');
    t.same((await readdir(dataDir)).filter((f) => /^(ca|ca-key)\.pem$|^join-token$/.test(f)).sort(), [
      'ca-key.pem',
      'ca.pem',
      'join-token',
    ]);
    const run = startReadOnly(dataDir);
    t.equal(run.status, 0, run.out);
    t.match(run.out, /started on \d+/);
  });

  t.test('starts with a group-readable key as a secret mount makes it (0440)', async (t) => {
    const dataDir = await provisioned(t, 'ro-group');
    await chmod(join(dataDir, 'ca-key.pem'), 0o440);
    await chmod(join(dataDir, 'join-token'), 0o440);
    const run = startReadOnly(dataDir);
    t.equal(run.status, 0, run.out);
  });

  t.test('a key readable by every user, which cannot be made private, is refused with what to do', async (t) => {
    const dataDir = await provisioned(t, 'ro-world');
    await chmod(join(dataDir, 'ca-key.pem'), 0o644);
    const run = startReadOnly(dataDir);
    t.equal(run.status, 3, run.out);
    t.match(
      run.out,
      /refused: GATE_ERR_CONFIG_INVALID .*ca-key\.pem is readable by every user \(mode 0644\) and cannot be changed \(EROFS\): provision it with mode 0600/,
    );
  });

  t.test('without a development token: refused, saying to provision it or turn it off; off, it starts', async (t) => {
    const dataDir = await provisioned(t, 'ro-no-token');
    await writeFile(join(dataDir, 'join-token'), 'not a token\n');
    const run = startReadOnly(dataDir);
    t.equal(run.status, 3, run.out);
    t.match(run.out, /cannot write the development join token .*join-token \(EROFS\).*auth_service\.development_token: false/);
    const off = startReadOnly(dataDir, { join_tokens: [{ token: 'static-token-0123456789abcdef' }] });
    t.equal(off.status, 0, off.out);
  });

  t.test('an empty read-only data_dir: refused, saying to provision the CA', async (t) => {
    const dataDir = await tempDir(t, 'ro-empty');
    const run = startReadOnly(dataDir);
    t.equal(run.status, 3, run.out);
    t.match(run.out, /has no cluster CA and cannot be written \(EROFS\): make it writable, or provision ca\.pem and ca-key\.pem/);
  });
});

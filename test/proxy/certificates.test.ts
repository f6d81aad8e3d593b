// What the proxy keeps in data_dir (issue 41): a start that fails (its port taken) writes no server
// certificate and never touches the one a running proxy made; a second proxy on the same data_dir
// reuses the fitting certificate instead of replacing it; a new name makes a new one, saved once
// the listeners are bound.
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { ErrorCodes } from '../../lib/errors.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { tempDir } from '../helpers/temp-dir.js';

/** The certificate the proxy at `port` presents (PEM-free: its fingerprint). */
async function servedFingerprint(port: number, ca: string): Promise<string> {
  const socket = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', ca, ALPNProtocols: ['http/1.1'] });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  const fingerprint = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
  socket.destroy();
  return fingerprint;
}

const fingerprintOf = (pem: string): string => new X509Certificate(pem).fingerprint256;

t.test('a failed start writes no server certificate and leaves the running one alone', async (t) => {
  const dataDir = await tempDir(t, 'cert-data');
  const first = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir });
  const port = first.port('multiplex');
  const serverFile = join(dataDir, 'server.pem');
  const before = await readFile(serverFile, 'utf8');
  const beforeMtime = (await stat(serverFile)).mtimeMs;
  t.equal(fingerprintOf(before), await servedFingerprint(port, first.ca), 'the file is the certificate the proxy serves');

  // A second proxy on the same data_dir and the same port, with a name the first one's
  // certificate does not cover (so it would have issued a new one): it fails to bind.
  await t.rejects(
    startGateProxy(t, {
      mode: 'multiplex',
      upstreams: {},
      dataDir,
      proxyService: { web_listen_addr: `127.0.0.1:${port}`, public_addr: 'other.example.com' },
    }),
    { code: ErrorCodes.LISTEN_FAILED },
  );
  t.equal(await readFile(serverFile, 'utf8'), before, 'server.pem unchanged');
  t.equal((await stat(serverFile)).mtimeMs, beforeMtime, 'not even rewritten');
  t.equal(await servedFingerprint(port, first.ca), fingerprintOf(before), 'the first proxy serves what it did');

  // A fresh data_dir whose first start fails: no server certificate is left behind.
  const fresh = await tempDir(t, 'cert-fresh');
  await t.rejects(
    startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir: fresh, proxyService: { web_listen_addr: `127.0.0.1:${port}` } }),
    { code: ErrorCodes.LISTEN_FAILED },
  );
  await t.rejects(stat(join(fresh, 'server.pem')), { code: 'ENOENT' }, 'no server.pem from a start that failed');
  await t.rejects(stat(join(fresh, 'server-key.pem')), { code: 'ENOENT' }, 'nor its key');
});

t.test('a second proxy on the same data_dir reuses the fitting certificate; a new name gets a new one', async (t) => {
  const dataDir = await tempDir(t, 'cert-shared');
  const first = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir });
  const serverFile = join(dataDir, 'server.pem');
  const made = await readFile(serverFile, 'utf8');
  const second = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir });
  t.equal(await readFile(serverFile, 'utf8'), made, 'the file is kept');
  t.equal(await servedFingerprint(second.port('multiplex'), second.ca), fingerprintOf(made), 'and served by both');
  t.equal(await servedFingerprint(first.port('multiplex'), first.ca), fingerprintOf(made));

  const renamed = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir, proxyService: { public_addr: 'gate.example.com' } });
  const now = await readFile(serverFile, 'utf8');
  t.not(fingerprintOf(now), fingerprintOf(made), 'a name the old one lacks: a new certificate');
  t.ok(new X509Certificate(now).checkHost('gate.example.com'), 'for the new name');
  t.equal(await servedFingerprint(renamed.port('multiplex'), renamed.ca), fingerprintOf(now), 'saved once bound, and served');
  t.equal((await stat(join(dataDir, 'server-key.pem'))).mode & 0o777, 0o600, 'the key is 0600');
});

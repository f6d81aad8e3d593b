// Certificate requests as the proxy reads them from anonymous clients: only keys on the agent
// allow-list, checked before any signature math, and signatures verified by Node's crypto. The
// requests gate-mux builds are checked by OpenSSL too, and what the CA issues for each accepted
// key type verifies with `openssl verify`.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../lib/errors.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import {
  buildRequest,
  createKeyAndRequest,
  MAX_CSR_PEM_BYTES,
  verifyRequest,
  verifyRequestOffThread,
} from '../../lib/pki/certificate-request.js';
import { hostileRsaCsr } from '../helpers/hostile-csr.js';
import { requirePeer } from '../helpers/peers.js';
import { tempDir } from '../helpers/temp-dir.js';

t.test('each accepted key type: built, verified, issued for, and OpenSSL agrees', async (t) => {
  const openssl = requirePeer(t, 'openssl', 'openssl');
  const ca = CertificateAuthority.create('request test');
  const dir = await tempDir(t, 'gate-csr-');
  writeFileSync(join(dir, 'ca.pem'), ca.cert);
  const keys = {
    'rsa-2048': generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
    'rsa-4096': generateKeyPairSync('rsa', { modulusLength: 4096 }).privateKey,
    'p-256': generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
    'p-384': generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey,
    ed25519: generateKeyPairSync('ed25519').privateKey,
  };
  for (const [label, key] of Object.entries(keys)) {
    const csr = buildRequest(`agent-${label}`, key);
    const checked = verifyRequest(csr);
    t.equal(checked.commonName, `agent-${label}`, `${label}: the name comes back out`);
    const issued = ca.issueFor(checked.spki, { commonName: `agent-${label}`, usage: 'client', ttlMs: 600_000 });
    const cert = new X509Certificate(issued.cert);
    t.ok(cert.verify(new X509Certificate(ca.cert).publicKey), `${label}: the issued certificate is signed by the CA`);
    t.equal(
      cert.publicKey.export({ type: 'spki', format: 'der' }).toString('hex'),
      checked.spki.toString('hex'),
      `${label}: for the requester's key`,
    );
    t.equal(cert.serialNumber.toLowerCase().replace(/^0+/, ''), issued.serial, `${label}: serial as reported`);
    if (openssl) {
      t.match(
        execFileSync(openssl, ['req', '-verify', '-noout'], { input: csr, stdio: ['pipe', 'pipe', 'pipe'] }).toString() + 'ok',
        /ok/,
        `${label}: openssl req -verify`,
      );
      writeFileSync(join(dir, `${label}.pem`), issued.cert);
      t.match(
        execFileSync(openssl, ['verify', '-CAfile', join(dir, 'ca.pem'), '-purpose', 'sslclient', join(dir, `${label}.pem`)]).toString(),
        /: OK/,
        `${label}: openssl verify`,
      );
    }
  }
  for (const type of ['rsa', 'ec', 'ed25519'] as const)
    t.equal(verifyRequest(createKeyAndRequest('made', type).csr).commonName, 'made', `createKeyAndRequest(${type})`);
});

t.test('keys off the allow-list are refused before their signature is checked', async (t) => {
  const refused = (label: string, csr: string, reason: RegExp): void => {
    t.throws(() => verifyRequest(csr), { code: ErrorCodes.JOIN_CSR_INVALID, message: reason }, label);
  };
  refused('RSA-1024', buildRequest('a', generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey), /modulus of 1024 bits/);
  refused('RSA e=3', buildRequest('a', generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 3 }).privateKey), /exponent/);
  refused('P-521', buildRequest('a', generateKeyPairSync('ec', { namedCurve: 'P-521' }).privateKey), /curve secp521r1/);
  refused('secp256k1', buildRequest('a', generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).privateKey), /curve secp256k1/);
  // The attacks on the join endpoint, built byte by byte (random signatures).
  refused('a 4,096-bit exponent', hostileRsaCsr({ modulusBits: 2048, exponentBits: 4096 }), /over 600/);
  refused('a 17-bit exponent that is not 65537', hostileRsaCsr({ modulusBits: 2048, exponentBits: 17 }), /exponent/);
  refused('a 16,384-bit modulus', hostileRsaCsr({ modulusBits: 16_384, exponentBits: 17 }), /over 600/);
  refused(
    'a 120,000-bit exponent (22 KB)',
    hostileRsaCsr({ modulusBits: 4096, exponentBits: 120_000 }),
    new RegExp(`over ${MAX_CSR_PEM_BYTES}`),
  );
});

t.test('malformed requests are refused with the reason, whatever their shape', async (t) => {
  const good = createKeyAndRequest('shape', 'ec').csr;
  const der = Buffer.from(good.replace(/-----[^-]+-----|\s/g, ''), 'base64');
  const pem = (bytes: Buffer): string =>
    `-----BEGIN CERTIFICATE REQUEST-----\n${bytes.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
  const cases: Array<[string, string]> = [
    ['not PEM', 'hello'],
    ['empty PEM', pem(Buffer.alloc(0))],
    ['truncated', pem(der.subarray(0, der.length - 10))],
    ['trailing bytes', pem(Buffer.concat([der, Buffer.from([0])]))],
    ['indefinite length', pem(Buffer.from([0x30, 0x80, 0, 0]))],
    // 3,000 nested SEQUENCEs: the reader never recurses, so depth costs nothing.
    ['deeply nested', pem(Buffer.concat([...Array.from({ length: 3000 }, () => Buffer.from([0x30, 0x82, 0x10, 0x00]))]))],
    ['not base64', '-----BEGIN CERTIFICATE REQUEST-----\n!!!!\n-----END CERTIFICATE REQUEST-----\n'],
  ];
  for (const [label, csr] of cases) t.throws(() => verifyRequest(csr), { code: ErrorCodes.JOIN_CSR_INVALID }, label);
  const flipped = Buffer.from(der);
  flipped[flipped.length - 5] = flipped[flipped.length - 5]! ^ 1;
  t.throws(
    () => verifyRequest(pem(flipped)),
    { code: ErrorCodes.JOIN_CSR_INVALID, message: /does not verify/ },
    'a signature off by one bit',
  );
  await t.rejects(
    verifyRequestOffThread(pem(flipped)),
    { code: ErrorCodes.JOIN_CSR_INVALID, message: /does not verify/ },
    'also when verified on the thread pool',
  );
  t.equal((await verifyRequestOffThread(good)).commonName, 'shape', 'which accepts the untouched request');
  const ca = CertificateAuthority.create('off-thread');
  const issued = await ca.issueForOffThread((await verifyRequestOffThread(good)).spki, {
    commonName: 'shape',
    usage: 'client',
    ttlMs: 60_000,
  });
  t.ok(new X509Certificate(issued.cert).verify(new X509Certificate(ca.cert).publicKey), 'a certificate signed on the thread pool verifies');
});

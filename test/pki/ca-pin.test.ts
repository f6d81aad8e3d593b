// The CA pin against OpenSSL's own computation of the same thing: SHA-256 over the DER
// SubjectPublicKeyInfo (`openssl x509 -pubkey | openssl pkey -pubin -outform der | sha256`).
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { ErrorCodes } from '../../lib/errors.js';
import { caPin, parseCaPin } from '../../lib/pki/ca-pin.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { createKeyAndRequest, verifyRequest } from '../../lib/pki/certificate-request.js';
import { requirePeer } from '../helpers/peers.js';

t.test('caPin is sha256:<hex> of the DER SubjectPublicKeyInfo, as OpenSSL computes it', async (t) => {
  const openssl = requirePeer(t, 'openssl', 'openssl');
  if (!openssl) return;
  const ca = CertificateAuthority.create('pin test');
  const spkiPem = execFileSync(openssl, ['x509', '-pubkey', '-noout'], { input: ca.cert });
  const der = execFileSync(openssl, ['pkey', '-pubin', '-outform', 'der'], { input: spkiPem });
  const digest = execFileSync(openssl, ['dgst', '-sha256', '-hex', '-r'], { input: der }).toString().split(' ')[0];
  t.equal(caPin(ca.cert), `sha256:${digest}`);
  t.not(caPin(CertificateAuthority.create('another').cert), caPin(ca.cert), 'another CA, another pin');
});

t.test('parseCaPin accepts the printed form (any case) and nothing else', async (t) => {
  const hex = 'ab'.repeat(32);
  t.equal(parseCaPin(`  sha256:${hex.toUpperCase()} `), `sha256:${hex}`);
  for (const bad of ['', hex, `sha1:${hex}`, `sha256:${hex.slice(2)}`, `sha256:${'zz'.repeat(32)}`]) {
    t.throws(() => parseCaPin(bad), { code: ErrorCodes.INVALID_ARGUMENT }, JSON.stringify(bad));
  }
});

t.test('certificate requests: the name and the key come back out; a tampered request does not verify', async (t) => {
  const { key, csr } = createKeyAndRequest('db-agent');
  t.match(key, /BEGIN RSA PRIVATE KEY/);
  t.equal(verifyRequest(csr).commonName, 'db-agent');
  const body = csr.split('\n');
  const middle = Math.floor(body.length / 2);
  body[middle] = body[middle]!.replace(/[A-Za-z]/, (c) => (c === 'A' ? 'B' : 'A'));
  t.throws(() => verifyRequest(body.join('\n')), { code: ErrorCodes.JOIN_CSR_INVALID });
  t.throws(() => verifyRequest('-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n'), {
    code: ErrorCodes.JOIN_CSR_INVALID,
  });
});

import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { CertificateAuthority, serialFromBytes } from '../../lib/pki/certificate-authority.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';

t.test('issued server certificate verifies against the CA and carries its SANs', async (t) => {
  const { ca, server } = devCertificates();
  const caCert = new X509Certificate(ca.cert);
  const leaf = new X509Certificate(server.cert);
  t.ok(caCert.ca, 'CA certificate has basicConstraints cA');
  t.ok(leaf.verify(caCert.publicKey), 'leaf signed by CA');
  t.ok(leaf.checkIssued(caCert), 'issuer matches');
  t.equal(leaf.checkHost('localhost'), 'localhost');
  t.equal(leaf.checkIP('127.0.0.1'), '127.0.0.1');
  t.equal(leaf.checkHost('example.com'), undefined);
  t.ok(leaf.checkPrivateKey(await import('node:crypto').then((c) => c.createPrivateKey(server.key))));
});

t.test('a CA reloaded from PEM issues certificates that chain to the same root', async (t) => {
  const { ca } = devCertificates();
  const reloaded = CertificateAuthority.fromPem({ cert: ca.cert, key: ca.key });
  const leaf = new X509Certificate(reloaded.issue({ commonName: 'x', dnsNames: ['x.test'] }).cert);
  t.ok(leaf.verify(new X509Certificate(ca.cert).publicKey));
});

t.test('refuses a non-IP in ipAddresses', async (t) => {
  const { ca } = devCertificates();
  t.throws(() => ca.issue({ commonName: 'x', ipAddresses: ['not-an-ip'] }), { code: 'GATE_ERR_INVALID_ARGUMENT' });
});

t.test('a serial is positive with no leading zero byte, whatever the random bytes (DER, and OpenSSL 3.5)', async (t) => {
  for (const first of [0x00, 0x01, 0x7f, 0x80, 0xff]) {
    const serial = serialFromBytes(Buffer.from([first, 0x05, ...Buffer.alloc(14, 0x33)]));
    const top = Number.parseInt(serial.slice(0, 2), 16);
    t.ok(top >= 0x01 && top <= 0x7f, `first random byte 0x${first.toString(16)}: serial starts 0x${serial.slice(0, 2)}`);
    t.equal(serial.length, 32, '16 bytes');
  }
  const random = Buffer.alloc(16, 0x42);
  serialFromBytes(random);
  t.equal(random[0], 0x42, 'the random bytes are not changed in place');
});

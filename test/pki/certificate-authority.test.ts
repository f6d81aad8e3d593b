import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
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

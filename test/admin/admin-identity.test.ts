// Who asks the admin endpoint, from the TLS facts alone: only a cluster CA certificate with an
// admin URI is an identity; agents' and proxies' certificates, foreign ones and plaintext are not.
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { adminIdentityOf, userCommonName, userUri } from '../../lib/admin/admin-identity.js';
import { isValidAgentName } from '../../lib/vocabulary/agent-name.js';
import { ADMIN_LOCAL_URI, PEER_ROLE_URI } from '../../lib/wire/names.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';

const facts = (subjectAltName: string | undefined, authorized = true) => ({
  tls: true,
  authorized,
  authorizationError: authorized ? undefined : 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  subjectAltName,
});

t.test('the identities', async (t) => {
  t.same(adminIdentityOf(facts(`URI:${ADMIN_LOCAL_URI}`)), { kind: 'local', name: 'admin (local)' });
  const id = 'a'.repeat(32);
  t.same(adminIdentityOf(facts(`DNS:x, URI:${userUri('alice@example.com', id)}`)), {
    kind: 'user',
    name: 'alice@example.com',
    identityId: id,
  });
});

t.test('what is refused, with the code and why', async (t) => {
  const refused = (f: Parameters<typeof adminIdentityOf>[0], why: RegExp) =>
    t.throws(() => adminIdentityOf(f), { code: 'GATE_ERR_ADMIN_UNAUTHENTICATED', message: why });
  refused({ ...facts(undefined), tls: false }, /plaintext/);
  refused(facts(undefined), /no client certificate/);
  refused(facts(`URI:${ADMIN_LOCAL_URI}`, false), /not from this cluster's CA \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\)/);
  refused(facts('DNS:db-1'), /names no admin identity/);
  refused(facts(`URI:${PEER_ROLE_URI}`), /names no admin identity/);
  refused(facts(`URI:${userUri('alice', 'not-hex')}`), /names no admin identity/);
});

t.test("a user's certificate names no agent: it cannot hold a tunnel", async (t) => {
  t.notOk(isValidAgentName(userCommonName('alice')));
  const ca = CertificateAuthority.create();
  const pair = ca.issue({ commonName: userCommonName('alice'), uris: [userUri('alice', 'b'.repeat(32))], usage: 'client' });
  const cert = new X509Certificate(pair.cert);
  t.match(cert.subjectAltName, `URI:urn:gate-mux:user:alice:${'b'.repeat(32)}`);
  t.same(adminIdentityOf(facts(cert.subjectAltName)), { kind: 'user', name: 'alice', identityId: 'b'.repeat(32) });
});

/**
 * Fail closed on client certificates: a terminated route with requestCert + rejectUnauthorized
 * refuses a client without a certificate or with one from another CA (GATE_ERR_TLS_HANDSHAKE),
 * and serves one the configured CA signed. A hand-built TLSSocket does not enforce this itself.
 */
import t from 'tap';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, terminate } from '../../lib/handlers/builders.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { until } from '../helpers/net.js';

t.test('requestCert + rejectUnauthorized: only a client certificate from the CA is served', async (t) => {
  const { ca, server: pair, client } = devCertificates();
  const stranger = CertificateAuthority.create().issue({ commonName: 'stranger', usage: 'client' });
  const mux = new Multiplexer({
    routes: [
      {
        name: 'mtls',
        match: { sni: 'localhost' },
        handler: terminate(
          { ...pair, ca: ca.cert, requestCert: true, rejectUnauthorized: true },
          custom((s, info) => void s.end(`hello ${info.remote.address}\n`)),
        ),
      },
    ],
  });
  const { port } = await mux.listen({ port: 0 });
  t.teardown(() => mux.close({ graceMs: 50 }));
  const attempt = (identity?: { cert: string; key: string }): Promise<string> =>
    new Promise((resolve) => {
      const s = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', ca: ca.cert, ...(identity ?? {}) });
      let text = '';
      s.on('data', (d: Buffer) => (text += d.toString()));
      s.on('error', () => {});
      s.on('close', () => resolve(text));
    });
  t.equal(await attempt(), '', 'no certificate: nothing served');
  t.equal(await attempt(stranger), '', 'certificate from another CA: nothing served');
  t.equal(await attempt(client), 'hello 127.0.0.1\n', 'certificate from the CA: served');
  await until(() => mux.openConnections === 0, 'connections to settle');
  t.equal(mux.stats().failures.GATE_ERR_TLS_HANDSHAKE, 2);
  t.equal(mux.stats().byRoute.mtls?.connections, 3);
});

t.test('requestCert without rejectUnauthorized: everyone is served, the handler sees who verified', async (t) => {
  const { ca, server: pair, client } = devCertificates();
  const stranger = CertificateAuthority.create().issue({ commonName: 'stranger', usage: 'client' });
  const mux = new Multiplexer({
    routes: [
      {
        name: 'optional',
        match: { sni: 'localhost' },
        handler: terminate(
          { ...pair, ca: ca.cert, requestCert: true, rejectUnauthorized: false },
          custom((s) => void s.end(`authorized=${(s as TLSSocket).authorized}\n`)),
        ),
      },
    ],
  });
  const { port } = await mux.listen({ port: 0 });
  t.teardown(() => mux.close({ graceMs: 50 }));
  const ask = (identity: { cert: string; key: string }): Promise<string> =>
    new Promise((resolve) => {
      const s = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', ca: ca.cert, ...identity });
      let text = '';
      s.on('data', (d: Buffer) => (text += d.toString()));
      s.on('error', () => {});
      s.on('close', () => resolve(text));
    });
  t.equal(await ask(client), 'authorized=true\n');
  t.equal(await ask(stranger), 'authorized=false\n');
});

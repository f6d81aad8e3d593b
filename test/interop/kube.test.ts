import t, { type Test } from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { describeResult, runClient, type ClientResult } from '../helpers/clients.js';
import { requirePeer } from '../helpers/peers.js';
import { tempDir } from '../helpers/temp-dir.js';
import { CLUSTER_NAME, GIT_VERSION, startApiServer } from '../helpers/kube-api.js';

/**
 * kubectl through the proxy to a Kubernetes-like TLS upstream that demands a client certificate.
 * The server name `kube-gate-proxy-alpn.<cluster>` routes the connection, and the TLS is passed
 * through untouched: the upstream holds the only key for that name and sees kubectl's own client
 * certificate, which it could not if the proxy had terminated TLS.
 */

const kubectl = requirePeer(t, 'kubectl', 'kubernetes-client');

if (kubectl) {
  const ca = CertificateAuthority.create('gate-mux interop kube CA');
  const user = ca.issue({ commonName: 'gate-interop-user', usage: 'client' });
  const api = await startApiServer(ca);
  t.teardown(() => {
    api.server.closeAllConnections();
    return new Promise<void>((resolve) => api.server.close(() => resolve()));
  });
  const upstreams = { kube: `127.0.0.1:${api.port}` };
  const mux = await startGateProxy(t, { mode: 'multiplex', upstreams });
  const separate = await startGateProxy(t, { mode: 'separate', upstreams });
  const home = await tempDir(t, 'kube-home');
  const b64 = (text: string): string => Buffer.from(text).toString('base64');

  /**
   * A kubeconfig for `https://127.0.0.1:<port>` with the routing server name, with a client
   * certificate or a bearer token instead (with no credentials at all kubectl would prompt).
   */
  async function kubeconfig(port: number, withClientCert = true): Promise<string> {
    const file = join(home, `config-${port}-${withClientCert ? 'cert' : 'anon'}`);
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'gate',
          cluster: { server: `https://127.0.0.1:${port}`, 'tls-server-name': CLUSTER_NAME, 'certificate-authority-data': b64(ca.cert) },
        },
      ],
      users: [
        {
          name: 'interop',
          user: withClientCert
            ? { 'client-certificate-data': b64(user.cert), 'client-key-data': b64(user.key) }
            : { token: 'not-a-certificate' },
        },
      ],
      contexts: [{ name: 'interop', context: { cluster: 'gate', user: 'interop' } }],
      'current-context': 'interop',
    };
    await writeFile(file, stringify(config), { mode: 0o600 });
    return file;
  }

  function run(config: string, args: string[]): Promise<ClientResult> {
    // HOME for kubectl's discovery cache; no proxy variables (kubectl would honour them).
    return runClient(kubectl!, [...args, '--request-timeout=20s'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, KUBECONFIG: config },
    });
  }

  async function versionAndHealth(t: Test, port: number): Promise<void> {
    const config = await kubeconfig(port);
    const before = api.seen.length;
    const version = await run(config, ['version', '-o', 'json']);
    t.equal(version.code, 0, describeResult(version));
    const parsed = JSON.parse(version.stdout.toString()) as { serverVersion?: { gitVersion?: string } };
    t.equal(parsed.serverVersion?.gitVersion, GIT_VERSION, 'kubectl read the upstream /version');
    const health = await run(config, ['get', '--raw', '/healthz']);
    t.equal(health.code, 0, describeResult(health));
    t.equal(health.stdout.toString().trim(), 'ok');
    const requests = api.seen.slice(before);
    // kubectl version may ask for /version more than once (its skew check).
    t.same([...new Set(requests.map((r) => r.path))].sort(), ['/healthz', '/version'], 'the upstream answered both');
    for (const r of requests) {
      t.equal(r.clientCn, 'gate-interop-user', `${r.path}: the upstream saw kubectl's client certificate (TLS passed through)`);
      t.equal(r.servername, CLUSTER_NAME, `${r.path}: and kubectl's server name`);
    }
  }

  t.test('multiplexed port: routed by the kube-gate-proxy-alpn. server name, passed through', async (t) => {
    await versionAndHealth(t, mux.port('multiplex'));
    t.ok(mux.route('multiplex', 'kube').connections >= 2, 'both kubectl runs took the kube route');
  });

  t.test('separate mode: the Kubernetes port passes TLS through; the web port routes by server name', async (t) => {
    await versionAndHealth(t, separate.port('kube'));
    t.ok(separate.route('kube', 'kube').connections >= 2, 'the Kubernetes port took both runs');
    await versionAndHealth(t, separate.port('web'));
    t.ok(separate.route('web', 'kube').connections >= 2, 'the web port routed both runs to kube');
  });

  t.test('without a client certificate the upstream refuses: the proxy did not terminate or vouch', async (t) => {
    const before = api.seen.length;
    const refusedBefore = api.refused.length;
    const result = await run(await kubeconfig(mux.port('multiplex'), false), ['get', '--raw', '/healthz']);
    t.not(result.code, 0, 'kubectl failed');
    // TLS 1.3: the server checks the client's (empty) certificate after kubectl's side of the
    // handshake is done, so kubectl only sees the connection end; the upstream says why.
    t.ok(api.refused.length > refusedBefore, 'the upstream itself refused the handshake');
    t.match(api.refused.slice(refusedBefore), [/PEER_DID_NOT_RETURN_A_CERTIFICATE/], describeResult(result));
    t.equal(api.seen.length, before, 'no request reached the upstream');
  });
}

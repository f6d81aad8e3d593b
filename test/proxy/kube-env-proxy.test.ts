// The Kubernetes upstream dial honours HTTPS_PROXY / NO_PROXY through the same proxyForTarget rules
// as every other dial, with a real tinyproxy. Loopback targets are always dialled
// directly by those rules, so the kube upstream is written 0.0.0.0:<port>: Linux connects to
// 0.0.0.0 on the loopback interface, while the rules (like Go's httpproxy) do not count it as
// loopback. Nothing leaves the machine.
import t from 'tap';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startTlsEchoServer } from '../helpers/echo-servers.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { echoOnce, tlsClient } from '../helpers/net.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

t.test('kube upstream: through HTTPS_PROXY unless NO_PROXY names it or kube.gate.cluster.local; databases stay direct', async (t) => {
  const tinyproxy = await startTinyproxy(t);
  if (!tinyproxy) return;
  const kube = await startTlsEchoServer(t);
  const target = `0.0.0.0:${kube.port}`;
  const connects = (): number => tinyproxy.output().split(`CONNECT ${target}`).length - 1;
  const { ca } = devCertificates();

  const proxied = await startGateProxy(t, { mode: 'multiplex', upstreams: { kube: target }, env: { HTTPS_PROXY: tinyproxy.url } });
  const client = await tlsClient(proxied.port('multiplex'), { servername: 'kube.gate.cluster.local', ca: ca.cert });
  t.equal(await echoOnce(client, 'via-proxy\n'), 'via-proxy\n', 'the passthrough reached the kube server');
  client.destroy();
  t.equal(connects(), 1, 'through tinyproxy (CONNECT 0.0.0.0:port)');
  t.equal(kube.accepted(), 1);

  const direct = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { kube: target },
    env: { HTTPS_PROXY: tinyproxy.url, NO_PROXY: '0.0.0.0' },
  });
  const second = await tlsClient(direct.port('multiplex'), { servername: 'kube.gate.cluster.local', ca: ca.cert });
  t.equal(await echoOnce(second, 'direct\n'), 'direct\n');
  second.destroy();
  t.equal(connects(), 1, 'NO_PROXY: dialled directly, tinyproxy saw nothing new');
  t.equal(kube.accepted(), 2);

  // The document's fix for a local cluster: kube.gate.cluster.local in NO_PROXY (the upstream's
  // own address is not named), alone and among other entries, with and without its port.
  let accepted = 2;
  for (const noProxy of [
    'kube.gate.cluster.local',
    '.example.com,kube.gate.cluster.local,10.0.0.0/8',
    `kube.gate.cluster.local:${kube.port}`,
  ]) {
    const byName = await startGateProxy(t, {
      mode: 'multiplex',
      upstreams: { kube: target },
      env: { HTTPS_PROXY: tinyproxy.url, NO_PROXY: noProxy },
    });
    const socket = await tlsClient(byName.port('multiplex'), { servername: 'kube.gate.cluster.local', ca: ca.cert });
    t.equal(await echoOnce(socket, 'local\n'), 'local\n');
    socket.destroy();
    t.equal(connects(), 1, `NO_PROXY=${noProxy}: direct, tinyproxy's log has no new CONNECT`);
    t.equal(kube.accepted(), ++accepted);
  }
  // Another port on that name, or another name, does not exempt it.
  const otherPort = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { kube: target },
    env: { HTTPS_PROXY: tinyproxy.url, NO_PROXY: 'kube.gate.cluster.local:1,kube.example.com' },
  });
  const third = await tlsClient(otherPort.port('multiplex'), { servername: 'kube.gate.cluster.local', ca: ca.cert });
  t.equal(await echoOnce(third, 'proxied\n'), 'proxied\n');
  third.destroy();
  t.equal(connects(), 2, 'through tinyproxy again');

  const unreachable = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { kube: target },
    env: { HTTPS_PROXY: 'http://127.0.0.2:1' },
  });
  const failed = await tlsClient(unreachable.port('multiplex'), { servername: 'kube.gate.cluster.local', ca: ca.cert }).catch(
    (err: Error) => err,
  );
  t.ok(failed instanceof Error, 'no TLS session when the environment proxy is down');
  t.equal(unreachable.stats('multiplex').failures.GATE_ERR_PROXY_UNREACHABLE, 1, 'the failure carries the dialer code');
});

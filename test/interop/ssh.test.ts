import t, { type Test } from 'tap';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { describeResult, localProxyTo, runClient } from '../helpers/clients.js';
import { requirePeer } from '../helpers/peers.js';
import { prng } from '../helpers/prng.js';
import { sshClientArgs, startSshd, type RunningSshd } from '../helpers/sshd.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

/**
 * The OpenSSH client against a real sshd through the proxy: SSH inside TLS (ALPN gate-proxy-ssh)
 * through the local proxy or an `openssl s_client` ProxyCommand, plaintext SSH on the shared port
 * (the client's "SSH-2.0-" banner), the separate SSH port, and through a real corporate proxy.
 * Every case logs in with a key, checks the server's host key, runs `cat` and gets a seeded
 * random payload back byte for byte.
 */

const ssh = requirePeer(t, 'ssh', 'openssh-client');
const sshd = ssh ? await startSshd(t) : undefined;
const payload = prng(0x55a).bytes(256 * 1024);

async function roundTrip(t: Test, server: RunningSshd, port: number, extra: string[] = []): Promise<void> {
  const result = await runClient(ssh!, [...sshClientArgs(server, { port, extra }), 'cat'], { input: payload });
  t.equal(result.code, 0, describeResult(result));
  t.equal(result.stdout.length, payload.length, 'as many bytes back as sent');
  t.ok(result.stdout.equals(payload), 'the same bytes back');
}

if (sshd) {
  const server: RunningSshd = sshd;
  const upstreams = { ssh: `${server.host}:${server.port}` };
  const mux = await startGateProxy(t, { mode: 'multiplex', upstreams });
  const separate = await startGateProxy(t, { mode: 'separate', upstreams });

  t.test('multiplexed port: ssh through the local proxy (TLS, ALPN gate-proxy-ssh)', async (t) => {
    const local = await localProxyTo(t, mux, 'multiplex', ['gate-proxy-ssh']);
    await roundTrip(t, server, local);
    t.equal(mux.route('multiplex', 'ssh-tls').connections, 1, 'taken by the SSH-in-TLS route');
  });

  t.test('multiplexed port: ssh with an openssl s_client ProxyCommand (TLS verified, ALPN gate-proxy-ssh)', async (t) => {
    const openssl = requirePeer(t, 'openssl', 'openssl');
    if (!openssl) return;
    const before = mux.route('multiplex', 'ssh-tls').connections;
    const command = `${openssl} s_client -quiet -verify_return_error -verify_hostname localhost -CAfile ${mux.caFile} -servername localhost -alpn gate-proxy-ssh -connect 127.0.0.1:%p`;
    await roundTrip(t, server, mux.port('multiplex'), ['-o', `ProxyCommand=${command}`]);
    t.equal(mux.route('multiplex', 'ssh-tls').connections, before + 1);
  });

  t.test('multiplexed port: plaintext ssh, recognised by its banner', async (t) => {
    await roundTrip(t, server, mux.port('multiplex'));
    t.equal(mux.route('multiplex', 'ssh').connections, 1, 'taken by the plaintext SSH route');
  });

  t.test('separate mode: plaintext on the SSH port, TLS routing on the web port', async (t) => {
    await roundTrip(t, server, separate.port('ssh'));
    t.equal(separate.route('ssh', 'ssh').connections, 1);
    const local = await localProxyTo(t, separate, 'web', ['gate-proxy-ssh']);
    await roundTrip(t, server, local);
    t.equal(separate.route('web', 'ssh-tls').connections, 1);
  });

  t.test('through a corporate proxy (tinyproxy) from HTTPS_PROXY, and NO_PROXY bypassing it', async (t) => {
    const proxy = await startTinyproxy(t);
    if (!proxy) return;
    // As in the Postgres test: loopback targets are always direct, so the local proxy dials the
    // multiplexer as 0.0.0.0:<port> (not loopback to the resolver; Linux delivers it to loopback).
    const port = mux.port('multiplex');
    const target = `0.0.0.0:${port}`;
    const connects = (): number => proxy.output().split(`CONNECT 0.0.0.0:${port}`).length - 1;
    const viaProxy = await localProxyTo(t, mux, 'multiplex', ['gate-proxy-ssh'], { target, env: { HTTPS_PROXY: proxy.url } });
    await roundTrip(t, server, viaProxy);
    t.equal(connects(), 1, 'tinyproxy carried the tunnel');
    const bypass = await localProxyTo(t, mux, 'multiplex', ['gate-proxy-ssh'], {
      target,
      env: { HTTPS_PROXY: proxy.url, NO_PROXY: '0.0.0.0' },
    });
    await roundTrip(t, server, bypass);
    t.equal(connects(), 1, 'tinyproxy saw no new CONNECT');
  });
}

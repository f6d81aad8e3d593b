import t, { type Test } from 'tap';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { describeResult, localProxyTo, runClient } from '../helpers/clients.js';
import { requirePeer } from '../helpers/peers.js';
import { prng } from '../helpers/prng.js';
import { startRedis } from '../helpers/redis.js';

/**
 * redis-cli against a real redis-server through the local proxy and the proxy: ALPN gate-redis on
 * the multiplexed port and the separate Redis port, and gate-redis-ping, whose stream the proxy
 * and the local proxy both frame (uint32 length + payload): redis-cli only gets sensible answers
 * if each side unwraps what the other wrapped.
 */

const redisCli = requirePeer(t, 'redis-cli', 'redis-tools');
const redis = redisCli ? await startRedis(t) : undefined;
const random = prng(0x7ed15);

async function cli(port: number, args: string[]): Promise<string> {
  const result = await runClient(redisCli!, ['-h', '127.0.0.1', '-p', String(port), '--raw', ...args]);
  if (result.code !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${describeResult(result)}`);
  return result.stdout.toString();
}

/** SET a fresh random value, GET it back, and read the key's length from the server. */
async function setGet(t: Test, port: number): Promise<void> {
  const key = `gate:${random.bytes(4).toString('hex')}`;
  const value = random.bytes(48).toString('base64');
  t.equal(await cli(port, ['SET', key, value]), 'OK\n', 'SET');
  t.equal(await cli(port, ['GET', key]), `${value}\n`, 'GET gives the value back');
  t.equal(await cli(port, ['STRLEN', key]), `${value.length}\n`, 'the server holds it');
}

if (redis) {
  const upstreams = { redis: `${redis.host}:${redis.port}` };
  const mux = await startGateProxy(t, { mode: 'multiplex', upstreams });
  const separate = await startGateProxy(t, { mode: 'separate', upstreams });

  t.test('multiplexed port: ALPN gate-redis', async (t) => {
    await setGet(t, await localProxyTo(t, mux, 'multiplex', ['gate-redis']));
    t.equal(mux.route('multiplex', 'redis').connections, 3);
  });

  t.test('multiplexed port: ALPN gate-redis-ping (framed stream, unwrapped on both sides)', async (t) => {
    await setGet(t, await localProxyTo(t, mux, 'multiplex', ['gate-redis-ping']));
    t.equal(mux.route('multiplex', 'redis-ping').connections, 3);
  });

  t.test('separate mode: the Redis port (plain and -ping ALPN) and TLS routing on the web port', async (t) => {
    await setGet(t, await localProxyTo(t, separate, 'redis', ['gate-redis']));
    await setGet(t, await localProxyTo(t, separate, 'redis', ['gate-redis-ping']));
    t.equal(separate.route('redis', 'redis').connections, 6);
    await setGet(t, await localProxyTo(t, separate, 'web', ['gate-redis']));
    t.equal(separate.route('web', 'redis').connections, 3);
  });
}

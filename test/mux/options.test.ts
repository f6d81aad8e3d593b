// Multiplexer options are checked in one place (lib/mux/options.ts): a bad value is refused with
// GATE_ERR_INVALID_ARGUMENT naming the option, before anything changes, and the values in force
// are read-only from outside.
import t from 'tap';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { MUX_DEFAULTS } from '../../lib/mux/options.js';
import { forward } from '../../lib/handlers/builders.js';
import type { MultiplexerSettings, Route } from '../../lib/mux/types.js';

const routes: Route[] = [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward('127.0.0.1:1') }];

t.test('defaults come from the one table', async (t) => {
  const mux = new Multiplexer({ routes });
  t.equal(mux.detectTimeoutMs, MUX_DEFAULTS.detectTimeoutMs);
  t.equal(mux.idleTimeoutMs, 0);
  t.equal(mux.maxConnectionsPerSource, 0);
  t.equal(mux.maxHelloBytes, MUX_DEFAULTS.maxHelloBytes);
  t.equal(mux.fastPath, true);
});

t.test('each bad value is refused naming its option', async (t) => {
  const bad: Array<[keyof MultiplexerSettings | 'fastPath', unknown]> = [
    ['detectTimeoutMs', Number.NaN],
    ['detectTimeoutMs', 0],
    ['detectTimeoutMs', -5],
    ['detectTimeoutMs', 2 ** 31],
    ['detectTimeoutMs', 1.5],
    ['idleTimeoutMs', Number.POSITIVE_INFINITY],
    ['idleTimeoutMs', -1],
    ['maxConnectionsPerSource', '10'],
    ['maxHelloBytes', 10],
    ['maxConnections', -1],
    ['fastPath', 'yes'],
  ];
  for (const [name, value] of bad) {
    t.throws(
      () => new Multiplexer({ routes, [name]: value } as never),
      { code: 'GATE_ERR_INVALID_ARGUMENT', message: new RegExp(`^${name}: expected`) },
      `${name} = ${String(value)}`,
    );
  }
  for (const trusted of [['10.0.0.0/33'], ['not-an-ip'], ['10.0.0.0/8/1'], [42]]) {
    t.throws(
      () => new Multiplexer({ routes, proxyProtocol: { mode: 'on', trusted } } as never),
      { code: 'GATE_ERR_INVALID_ARGUMENT', message: /^proxyProtocol\.trusted/ },
      JSON.stringify(trusted),
    );
  }
});

t.test('a refused setOptions changes nothing', async (t) => {
  const mux = new Multiplexer({ routes, detectTimeoutMs: 2_000, idleTimeoutMs: 5_000 });
  t.throws(() => mux.setOptions({ detectTimeoutMs: 3_000, idleTimeoutMs: Number.NaN }), { code: 'GATE_ERR_INVALID_ARGUMENT' });
  t.equal(mux.detectTimeoutMs, 2_000);
  t.equal(mux.idleTimeoutMs, 5_000);
  mux.setOptions({ detectTimeoutMs: 3_000 });
  t.equal(mux.detectTimeoutMs, 3_000);
  t.equal(mux.idleTimeoutMs, 0, 'an option not given goes back to its default');
});

t.test('the values in force cannot be written from outside', async (t) => {
  const mux = new Multiplexer({ routes });
  t.throws(() => {
    (mux as unknown as { detectTimeoutMs: number }).detectTimeoutMs = 1;
  }, TypeError);
  t.throws(() => {
    (mux as unknown as { fastPath: boolean }).fastPath = false;
  }, TypeError);
  t.equal(mux.detectTimeoutMs, MUX_DEFAULTS.detectTimeoutMs);
});

// The one dial of a bare TCP handle (transport/handle-dial.ts), which `forward` on handles and the
// agent's connection to a target share, and the one set of words for a dial that failed.
import t from 'tap';
import { createServer } from 'node:net';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { dialFailure, dialHandle, dialTimeout } from '../../lib/transport/handle-dial.js';
import { closeHandle, handlesAvailable, type TcpHandle } from '../../lib/transport/uv.js';
import { closeServer, listening, liveHandles } from '../helpers/net.js';

const dialOnce = (host: string, port: number, options: Parameters<typeof dialHandle>[2] = { timeoutMs: 5_000 }) =>
  new Promise<TcpHandle | GateError>((resolve) => dialHandle(host, port, options, resolve));

t.test('the words of a failed dial: refused, failed with its errno name, timed out; IPv6 in brackets', async (t) => {
  const refused = dialFailure(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), '::1', 80);
  t.equal(refused.code, ErrorCodes.DIAL_REFUSED);
  t.equal(refused.message, 'upstream [::1]:80 refused the connection');
  // Built from the error alone: looking up a name that does not exist would ask the machine's DNS
  // resolver, and the tests touch no network beyond loopback.
  const err = Object.assign(new Error('getaddrinfo ENOTFOUND db.internal'), { code: 'ENOTFOUND' });
  const failed = dialFailure(err, 'db.internal', 5432);
  t.equal(failed.code, ErrorCodes.DIAL_FAILED);
  t.equal(failed.message, 'dialing upstream db.internal:5432 failed: ENOTFOUND');
  t.equal(failed.cause, err, 'the cause is kept');
  t.equal(dialFailure(new Error('odd'), 'h', 1).message, 'dialing upstream h:1 failed: odd', 'no code: the message');
  const late = dialTimeout('10.0.0.1', 5432, 250);
  t.equal(late.code, ErrorCodes.DIAL_TIMEOUT);
  t.equal(late.message, 'upstream 10.0.0.1:5432 did not accept within 250 ms');
});

t.test('dialHandle on loopback', { skip: handlesAvailable ? false : 'no bare TCP handles in this Node' }, async (t) => {
  const server = createServer();
  const port = await listening(server);
  await closeServer(server);

  const refused = await dialOnce('127.0.0.1', port);
  t.ok(refused instanceof GateError && refused.code === ErrorCodes.DIAL_REFUSED, 'a closed port is GATE_ERR_DIAL_REFUSED');
  t.equal((refused as GateError).message, `upstream 127.0.0.1:${port} refused the connection`);
  t.equal(liveHandles().timers, 0, 'no deadline timer left after a failure');

  const listener = createServer((s) => s.destroy());
  const open = await listening(listener);
  const named = await dialOnce('localhost', open);
  t.notOk(named instanceof GateError, 'a name is resolved and its addresses tried until one accepts');
  if (!(named instanceof GateError)) closeHandle(named);

  const looked: string[] = [];
  const viaLookup = await dialOnce('db.test', open, {
    timeoutMs: 5_000,
    lookup: (host, _options, callback) => {
      looked.push(host);
      callback(null, [{ address: '127.0.0.1', family: 4 }]);
    },
  });
  t.same(looked, ['db.test'], "the caller's lookup resolves the name");
  t.notOk(viaLookup instanceof GateError, 'and its address is dialed');
  if (!(viaLookup instanceof GateError)) closeHandle(viaLookup);

  const offered: string[] = [];
  let called = false;
  dialHandle('127.0.0.1', open, { timeoutMs: 5_000, takeOver: (a) => (offered.push(a.address), true) }, () => (called = true));
  await new Promise((r) => setTimeout(r, 50));
  t.same(offered, ['127.0.0.1'], 'a single address is offered to takeOver first');
  t.notOk(called, 'taken over: the dial reports nothing');
  t.equal(liveHandles().timers, 0, 'and holds no timer');
  await closeServer(listener);

  // A lookup that never answers: only the deadline can end the dial.
  const stuck = await dialOnce('never.test', 1, { timeoutMs: 30, lookup: () => {} });
  t.ok(stuck instanceof GateError && stuck.code === ErrorCodes.DIAL_TIMEOUT, 'the deadline covers name resolution');
  t.equal((stuck as GateError).message, 'upstream never.test:1 did not accept within 30 ms');

  called = false;
  dialHandle('127.0.0.1', port, { timeoutMs: 5_000 }, () => (called = true))();
  await new Promise((r) => setTimeout(r, 50));
  t.notOk(called, 'a cancelled dial reports nothing');
  t.equal(liveHandles().timers, 0, 'and leaves no timer');
});

import t from 'tap';
import { forward, parseHostPort } from '../../lib/handlers/builders.js';
import { isGateError } from '../../lib/errors.js';

t.test('parseHostPort takes host:port and [v6]:port', async (t) => {
  t.same(parseHostPort('db.internal:5432'), { host: 'db.internal', port: 5432 });
  t.same(parseHostPort('[::1]:22'), { host: '::1', port: 22 });
});

t.test('a bad upstream address is a GateError with a code, not a TypeError', async (t) => {
  for (const bad of ['x', 'host:0', 'host:65536', '[::1]', ':80', 'a b:80']) {
    let err: unknown;
    try {
      forward(bad);
    } catch (e) {
      err = e;
    }
    t.ok(isGateError(err, 'GATE_ERR_INVALID_ARGUMENT'), `forward('${bad}') throws GATE_ERR_INVALID_ARGUMENT`);
  }
});

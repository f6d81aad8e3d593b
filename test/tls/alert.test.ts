import t from 'tap';
import { createServer, type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { TlsAlert, tlsAlertRecord, ALERT_UNRECOGNIZED_NAME, ALERT_NO_APPLICATION_PROTOCOL } from '../../lib/tls/alert.js';

t.test('record layout', async (t) => {
  t.same([...tlsAlertRecord(TlsAlert.unrecognizedName)], [21, 3, 3, 0, 2, 2, 112]);
  t.same([...tlsAlertRecord(ALERT_NO_APPLICATION_PROTOCOL)], [21, 3, 3, 0, 2, 2, 120]);
  t.same([TlsAlert.handshakeFailure, TlsAlert.decodeError, TlsAlert.internalError, ALERT_UNRECOGNIZED_NAME], [40, 50, 80, 112]);
  t.throws(() => tlsAlertRecord(256), { code: 'GATE_ERR_INVALID_ARGUMENT' });
  t.throws(() => tlsAlertRecord(1.5), { code: 'GATE_ERR_INVALID_ARGUMENT' });
});

// A real TLS client (Node/OpenSSL) must report the alert we send in place of a ServerHello.
t.test('a TLS client reports the alert', async (t) => {
  const server = createServer((socket) => {
    socket.once('data', () => socket.end(tlsAlertRecord(TlsAlert.unrecognizedName)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const { port } = server.address() as AddressInfo;
  const err = await new Promise<Error>((resolve) => {
    const c = tls.connect({ host: '127.0.0.1', port, servername: 'nobody.test', rejectUnauthorized: false });
    c.on('error', resolve);
    c.on('secureConnect', () => resolve(new Error('handshake completed')));
  });
  t.match(err.message, /unrecognized name/i);
});

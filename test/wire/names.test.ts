import t from 'tap';
import { isPingAlpn, mysqlVersionAlpn, mysqlVersionFromAlpn, pingAlpn } from '../../lib/wire/names.js';

t.test('ping variants', async (t) => {
  t.equal(pingAlpn('gate-postgres'), 'gate-postgres-ping');
  t.ok(isPingAlpn('gate-redis-ping'));
  t.notOk(isPingAlpn('gate-redis'));
  t.notOk(isPingAlpn(undefined));
});

t.test('versioned MySQL ALPN', async (t) => {
  const alpn = mysqlVersionAlpn('8.0.36-gate');
  t.equal(alpn, `gate-mysql-${Buffer.from('8.0.36-gate').toString('base64')}`);
  t.equal(mysqlVersionFromAlpn(alpn), '8.0.36-gate');
  t.equal(mysqlVersionFromAlpn(`${alpn}-ping`), '8.0.36-gate', 'ping suffix set aside');
  t.equal(mysqlVersionFromAlpn('gate-mysql'), undefined);
  t.equal(mysqlVersionFromAlpn('gate-mysql-ping'), undefined, 'the ping variant is not a version');
  t.equal(mysqlVersionFromAlpn('gate-mysql-'), undefined);
  t.equal(mysqlVersionFromAlpn('gate-mysql-!!!'), undefined, 'not base64');
  t.equal(mysqlVersionFromAlpn('gate-mysql-AA=='), undefined, 'decodes to a control byte');
  t.equal(mysqlVersionFromAlpn('gate-mysql-OC4x'), '8.1');
  t.equal(mysqlVersionFromAlpn('gate-mysql-OC4y'), '8.2');
  t.equal(mysqlVersionFromAlpn('gate-mysql-OC4z'), '8.3');
  t.equal(mysqlVersionFromAlpn('gate-postgres'), undefined);
});

import t from 'tap';
import { isIPv4, isIPv6, SocketAddress } from 'node:net';
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from '../../lib/proxy-protocol/address.js';
import { crc32c } from '../../lib/proxy-protocol/crc32c.js';
import { prng } from '../helpers/prng.js';

t.test('IPv4: strict dotted quad', async (t) => {
  t.same([...parseIPv4('192.168.0.1')!], [192, 168, 0, 1]);
  t.same([...parseIPv4('0.0.0.0')!], [0, 0, 0, 0]);
  t.same([...parseIPv4('255.255.255.255')!], [255, 255, 255, 255]);
  for (const bad of [
    '',
    '1.2.3',
    '1.2.3.4.5',
    '01.2.3.4',
    '1.2.3.04',
    '256.1.1.1',
    '1..2.3',
    '.1.2.3',
    '1.2.3.4.',
    '1.2.3.a',
    ' 1.2.3.4',
    '1.2.3.4 ',
    '0x1.2.3.4',
    '1.2.3.-4',
  ]) {
    t.equal(parseIPv4(bad), undefined, JSON.stringify(bad));
  }
  t.equal(formatIPv4(Uint8Array.from([10, 0, 0, 255])), '10.0.0.255');
});

t.test('IPv6: parse', async (t) => {
  const hex = (s: string): string => Buffer.from(parseIPv6(s) ?? []).toString('hex');
  t.equal(hex('::'), '0'.repeat(32));
  t.equal(hex('::1'), `${'0'.repeat(31)}1`);
  t.equal(hex('1::'), `0001${'0'.repeat(28)}`);
  t.equal(hex('2001:DB8::ff00:42:8329'), '20010db8000000000000ff0000428329');
  t.equal(hex('1:2:3:4:5:6:7:8'), '00010002000300040005000600070008');
  t.equal(hex('::ffff:192.0.2.1'), '00000000000000000000ffffc0000201');
  t.equal(hex('1:2:3:4:5:6:1.2.3.4'), '00010002000300040005000601020304');
  t.equal(hex('1:2:3:4:5:6:7::'), '00010002000300040005000600070000');
  for (const bad of [
    '',
    ':',
    ':::',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    '1:::2',
    ':1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:',
    '12345::',
    'g::',
    'fe80::1%eth0',
    '[::1]',
    '::ffff:1.2.3',
    '::ffff:01.2.3.4',
    '::1.2.3.4:5',
    '1:2:3:4:5:6:7:1.2.3.4',
    '1:2:3:4:5:6:7:8::',
    '1.2.3.4',
  ]) {
    t.equal(parseIPv6(bad), undefined, JSON.stringify(bad));
  }
});

t.test('IPv6: format matches Node (libuv inet_ntop) and round-trips, seeded', async (t) => {
  const rand = prng(42);
  let bad = 0;
  let first = '';
  for (let i = 0; i < 3000; i++) {
    const bytes = rand.bytes(16);
    // make zero runs, IPv4-mapped and compatible forms likely
    for (let w = 0; w < 8; w++) if (rand.chance(0.5)) bytes.writeUInt16BE(0, 2 * w);
    if (rand.chance(0.1)) bytes.fill(0, 0, 10).writeUInt16BE(0xffff, 10);
    if (rand.chance(0.05)) bytes.fill(0, 0, 12);
    const text = formatIPv6(bytes);
    const node = new SocketAddress({ address: text, family: 'ipv6' }).address;
    const back = parseIPv6(text);
    if (text !== node || !back || Buffer.compare(Buffer.from(back), bytes) !== 0 || !isIPv6(text)) {
      bad++;
      first ||= `${bytes.toString('hex')} -> ${text} (node ${node})`;
    }
  }
  t.equal(bad, 0, first || 'all agree');
  t.equal(formatIPv6(parseIPv6('0:0:0:0:0:ffff:7f00:1')!), '::ffff:127.0.0.1');
  t.equal(formatIPv6(parseIPv6('1:0:0:1:0:0:0:1')!), '1:0:0:1::1');
  t.equal(formatIPv6(parseIPv6('1:0:1:0:1:0:1:0')!), '1:0:1:0:1:0:1:0', 'single zero words are not compressed');
  t.ok(isIPv4(formatIPv4(Uint8Array.from([1, 2, 3, 4]))));
});

t.test('CRC-32C check value', async (t) => {
  // The standard check value of CRC-32C over "123456789" (RFC 3720 B.4 family).
  t.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  t.equal(crc32c(Buffer.from('56789'), crc32c(Buffer.from('1234'))), 0xe3069283, 'in pieces');
  t.equal(crc32c(Buffer.alloc(32)), 0x8a9136aa, 'RFC 3720 B.4: 32 bytes of zeroes');
});

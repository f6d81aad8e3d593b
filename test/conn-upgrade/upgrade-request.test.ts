// The connection upgrade's pure parts: the request check, X-Forwarded-For, the environment switch
// and the remembered answers.
import t from 'tap';
import { checkUpgradeRequest, forwardedFor, isConnectionUpgradePath } from '../../lib/conn-upgrade/upgrade-request.js';
import { forcedUpgrade, UpgradeDecisions } from '../../lib/client/upgrade-decision.js';

const good = {
  method: 'GET',
  url: '/webapi/connectionupgrade',
  headers: {
    upgrade: 'websocket',
    connection: 'keep-alive, Upgrade',
    'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
    'sec-websocket-version': '13',
    'sec-websocket-protocol': 'chat, alpn-ping, alpn',
  },
};

t.test('a well-formed request takes the first of our sub-protocols the client lists', async (t) => {
  t.same(checkUpgradeRequest(good), { ok: true, protocol: 'alpn-ping' });
  t.same(checkUpgradeRequest({ ...good, headers: { ...good.headers, 'sec-websocket-protocol': 'alpn' } }), { ok: true, protocol: 'alpn' });
  t.same(
    checkUpgradeRequest({ ...good, headers: { ...good.headers, upgrade: 'WebSocket' } }).ok,
    true,
    'tokens compare case-insensitively',
  );
});

t.test('each malformed part is refused with its status', async (t) => {
  const without = (name: string) => {
    const headers: Record<string, string> = { ...good.headers };
    delete headers[name];
    return { ...good, headers };
  };
  const status = (r: ReturnType<typeof checkUpgradeRequest>) => (r.ok ? 101 : r.status);
  t.equal(status(checkUpgradeRequest({ ...good, method: 'POST' })), 405);
  t.equal(status(checkUpgradeRequest(without('upgrade'))), 400);
  t.equal(status(checkUpgradeRequest(without('connection'))), 400);
  t.equal(status(checkUpgradeRequest(without('sec-websocket-key'))), 400);
  t.equal(
    status(checkUpgradeRequest({ ...good, headers: { ...good.headers, 'sec-websocket-key': 'dG9vIHNob3J0' } })),
    400,
    'a key that is not 16 bytes',
  );
  t.equal(status(checkUpgradeRequest(without('sec-websocket-version'))), 426);
  t.equal(status(checkUpgradeRequest(without('sec-websocket-protocol'))), 400);
  t.equal(status(checkUpgradeRequest({ ...good, headers: { ...good.headers, 'sec-websocket-protocol': 'alpnx, ping' } })), 400);
});

t.test('the path, with or without a query', async (t) => {
  t.ok(isConnectionUpgradePath('/webapi/connectionupgrade'));
  t.ok(isConnectionUpgradePath('/webapi/connectionupgrade?x=1'));
  t.notOk(isConnectionUpgradePath('/webapi/connectionupgrade/more'));
  t.notOk(isConnectionUpgradePath(undefined));
});

t.test('X-Forwarded-For: exactly one IP address', async (t) => {
  t.same(forwardedFor('203.0.113.7'), { ok: true, address: '203.0.113.7' });
  t.same(forwardedFor(' 2001:db8::1 '), { ok: true, address: '2001:db8::1' });
  t.same(forwardedFor('[2001:db8::1]'), { ok: true, address: '2001:db8::1' });
  t.equal(forwardedFor('198.51.100.1, 203.0.113.7').ok, false, 'a client-sent header the balancer appended to');
  t.equal(forwardedFor(['198.51.100.1', '203.0.113.7']).ok, false, 'repeated headers');
  t.equal(forwardedFor(undefined).ok, false);
  t.equal(forwardedFor('').ok, false);
  t.equal(forwardedFor('unknown').ok, false);
  t.equal(forwardedFor('203.0.113.7:443').ok, false, 'an address with a port is not an address');
});

t.test('GATE_TLS_ROUTING_UPGRADE', async (t) => {
  t.equal(forcedUpgrade(undefined, 'gate.example.com:443'), undefined);
  t.equal(forcedUpgrade('', 'gate.example.com:443'), undefined);
  t.equal(forcedUpgrade('true', 'gate.example.com:443'), true);
  t.equal(forcedUpgrade('1', 'gate.example.com:443'), true);
  t.equal(forcedUpgrade('FALSE', 'gate.example.com:443'), false);
  t.equal(forcedUpgrade('lb.example.com:443, Gate.Example.com:443', 'gate.example.com:443'), true, 'listed (case-insensitive)');
  t.equal(forcedUpgrade('lb.example.com:443', 'gate.example.com:443'), undefined, 'not listed: detected');
  t.equal(forcedUpgrade('[2001:db8::1]:443', '[2001:DB8::1]:443'), true);
});

t.test('answers are remembered per address for the TTL, and bounded in number', async (t) => {
  let now = 0;
  const answers = new UpgradeDecisions(1000, 2, () => now);
  answers.set('a.example:443', true);
  answers.set('b.example:443', false);
  t.equal(answers.get('A.example:443'), true);
  t.equal(answers.get('b.example:443'), false);
  answers.set('c.example:443', true);
  t.equal(answers.get('a.example:443'), undefined, 'the oldest went past maxEntries');
  now = 1000;
  t.equal(answers.get('b.example:443'), undefined, 'expired');
  answers.set('d.example:443', true);
  answers.forget('d.example:443');
  t.equal(answers.get('d.example:443'), undefined, 'forgotten');
});

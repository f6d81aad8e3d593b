// The pure parts of agents' self-descriptions and the inventory: what the proxy accepts from the
// network, the version rule, server IDs, the merged rows, the table, the metric counts.
import t from 'tap';
import { PassThrough } from 'node:stream';
import { ErrorCodes } from '../../lib/errors.js';
import {
  descriptionLine,
  MAX_DESCRIPTION_BYTES,
  parseService,
  readDescription,
  upgraderFrom,
  type AgentDescription,
} from '../../lib/tunnel/agent-description.js';
import { readLines } from '../../lib/tunnel/read-lines.js';
import { isServerId, serverIdForName } from '../../lib/tunnel/server-id.js';
import { versionRefusal } from '../../lib/tunnel/version-rule.js';
import { fleetCounts, mergeInventory, parseInventoryRecord, recordFor } from '../../lib/cluster/inventory.js';
import { inventoryTable } from '../../lib/cli/inventory.js';
import type { InventoryRecord } from '../../lib/cluster/route-store.js';

const ID = '0b7c6a1e-2f4d-4c3b-9a8e-1d2c3b4a5f60';
const good: AgentDescription = {
  serverId: ID,
  hostname: 'db-1.internal',
  services: [{ kind: 'db', name: 'orders' }],
  version: '3.1.0',
  upgrader: 'unit',
  updateGroup: 'default',
};
const line = (extra: Record<string, unknown>) => JSON.stringify({ ...good, ...extra });

t.test('a description round-trips as one JSON line', async (t) => {
  const text = descriptionLine(good);
  t.ok(text.endsWith('\n'));
  t.same(readDescription(text.trimEnd()), { description: good, sanitised: [] });
  t.equal(readDescription(line({ serverId: ID.toUpperCase() })).description.serverId, ID, 'server IDs are kept in lower case');
});

t.test('hostile descriptions: refused with the code, or sanitised and said so', async (t) => {
  const refused = (text: string | Buffer, why: RegExp, what: string) =>
    t.throws(() => readDescription(text), { code: ErrorCodes.AGENT_DESCRIPTION_INVALID, message: why }, what);
  refused('x'.repeat(MAX_DESCRIPTION_BYTES + 1), /more than 16384/, 'huge');
  refused('{"serverId": ', /not JSON/, 'truncated JSON');
  refused('[1,2]', /not a JSON object/, 'an array');
  refused('null', /not a JSON object/, 'null');
  refused(line({ serverId: 'not-a-uuid' }), /server_id is not a UUID/, 'a server ID that is no UUID');
  refused(line({ version: 'latest' }), /not semver/, 'a version that is not semver');
  refused(line({ version: 'v3.1.0' }), /not semver/, 'a leading v is not what an agent sends');
  refused(line({ version: '3.1' }), /not semver/, 'two parts');
  refused(line({ version: 3 }), /not semver/, 'a number');
  refused(line({ upgrader: 'unit\nnone' }), /upgrader/, 'an upgrader with a newline');
  refused(line({ upgrader: '' }), /upgrader/, 'an empty upgrader');
  refused(line({ hostname: 7 }), /hostname/, 'a hostname that is not a string');
  refused(line({ services: 'db' }), /services/, 'services not a list');
  refused(line({ services: Array.from({ length: 257 }, (_, i) => ({ kind: 'app', name: `a${i}` })) }), /services/, 'too many services');
  refused(line({ services: [{ kind: 'db' }] }), /\{kind, name\}/, 'a service without a name');

  const forged = readDescription(line({ hostname: 'db-1\n2026-11-25 INFO admin logged in\u001b[2J\u202e' }));
  t.equal(forged.description.hostname, 'db-12026-11-25 INFO admin logged in[2J', 'control, escape and bidi characters removed');
  t.same(forged.sanitised, ['hostname']);
  t.equal(readDescription(line({ hostname: 'h'.repeat(400) })).description.hostname.length, 253, "cut to a DNS name's length");
  const services = readDescription(
    line({
      services: [
        { kind: 'db', name: 'a\tb' },
        { kind: 'printer', name: 'p' },
        { kind: 'ssh', name: '\u0007' },
      ],
    }),
  );
  t.same(services.description.services, [{ kind: 'db', name: 'ab' }], "unknown kinds (a newer agent's) and empty names left out");
  t.same(services.sanitised, ['services']);
  t.same(readDescription(line({ extra: 'x'.repeat(1000) })).description, good, 'unknown fields are ignored');
});

t.test('the update group: optional (an agent older than rollouts is in default), checked when given', async (t) => {
  const { updateGroup: _omitted, ...older } = good;
  t.equal(readDescription(JSON.stringify(older)).description.updateGroup, 'default', 'absent: default');
  t.equal(readDescription(line({ updateGroup: 'prod-eu.1' })).description.updateGroup, 'prod-eu.1');
  t.match(descriptionLine({ ...good, updateGroup: 'dev' }), /"updateGroup":"dev"/, 'sent on the line');
  for (const bad of ['', 'dev\nprod', 'a b', '-dev', 'g'.repeat(65), 7, null])
    t.throws(
      () => readDescription(line({ updateGroup: bad })),
      { code: ErrorCodes.AGENT_DESCRIPTION_INVALID, message: /updateGroup/ },
      `${JSON.stringify(bad)} refused`,
    );
});

t.test('--service KIND:NAME and GATE_EXT_UPGRADER', async (t) => {
  t.same(parseService('db:orders'), { kind: 'db', name: 'orders' });
  t.same(parseService(' SSH : web-1 '), { kind: 'ssh', name: 'web-1' });
  t.same(parseService('app:grafana:3000'), { kind: 'app', name: 'grafana:3000' }, 'the name may hold colons');
  for (const bad of ['db', 'db:', ':x', 'printer:x', `db:${'n'.repeat(129)}`, 'db:a\u0000b']) {
    t.throws(() => parseService(bad), { code: ErrorCodes.INVALID_ARGUMENT }, JSON.stringify(bad));
  }
  t.equal(upgraderFrom({}), 'none');
  t.equal(upgraderFrom({ GATE_EXT_UPGRADER: '' }), 'none');
  t.equal(upgraderFrom({ GATE_EXT_UPGRADER: ' unit ' }), 'unit');
});

t.test('the version rule: at most one major behind the proxy, never ahead; majors only', async (t) => {
  t.equal(versionRefusal('3.1.0', '3.1.0'), undefined);
  t.equal(versionRefusal('3.1.0', '3.9.2'), undefined, 'a minor ahead is the same major');
  t.equal(versionRefusal('3.1.0', '2.0.0'), undefined, 'one major behind');
  t.equal(versionRefusal('3.1.0', '3.0.0-rc.1'), undefined, 'a pre-release counts as its major');
  const behind = versionRefusal('3.1.0', '1.4.2');
  t.equal(behind?.code, ErrorCodes.AGENT_VERSION_INCOMPATIBLE);
  t.equal(behind?.message, 'proxy 3.1.0 accepts agents 2.x and 3.x; this agent is 1.4.2: upgrade it');
  t.match(
    versionRefusal('3.1.0', '4.0.0')?.message,
    /^proxy 3\.1\.0 accepts agents 2\.x and 3\.x; this agent is 4\.0\.0: upgrade the proxies first/,
  );
  t.equal(versionRefusal('0.1.0', '0.7.3'), undefined, 'major 0 is a major like any other');
  t.equal(
    versionRefusal('0.1.0', '1.0.0')?.message,
    'proxy 0.1.0 accepts agents 0.x; this agent is 1.0.0: upgrade the proxies first, or install an older agent',
  );
  t.equal(versionRefusal('1.0.0', '0.1.0'), undefined, 'a 1.x proxy takes 0.x agents');
  t.equal(versionRefusal('1.2.3-interop', '0.1.0'), undefined);
  t.equal(versionRefusal('dev', '9.9.9'), undefined, 'a proxy whose own version is not semver cannot apply the rule');
  t.equal(versionRefusal('3.1.0', 'garbage')?.code, ErrorCodes.AGENT_VERSION_INCOMPATIBLE);
});

t.test('server IDs: derived from the name', async (t) => {
  t.ok(isServerId(serverIdForName('edge')));
  t.equal(serverIdForName('edge'), serverIdForName('edge'), 'stable');
  t.not(serverIdForName('edge'), serverIdForName('edge2'));
  t.match(serverIdForName('edge'), /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a version-8 UUID');
});

t.test('lines are read whole, across chunks, and never held past the bound', async (t) => {
  const stream = new PassThrough();
  const lines: string[] = [];
  let overflow = 0;
  readLines(
    stream,
    10,
    (l) => lines.push(l.toString()),
    (n) => (overflow = n),
  );
  stream.write('ab');
  stream.write('c\nde\n');
  stream.write('f');
  stream.write('\n');
  t.same(lines, ['abc', 'de', 'f']);
  stream.write('0123456789ABC');
  t.equal(overflow, 13, 'a line longer than the bound stops the reading');
  stream.write('\nlate\n');
  t.same(lines, ['abc', 'de', 'f'], 'nothing more is read');
});

t.test("inventory rows: one per server ID, the newest tunnel's description, the holders listed", async (t) => {
  const record = (extra: Partial<InventoryRecord>): InventoryRecord => ({
    ...good,
    agent: 'db-1',
    proxyId: 'p1',
    generation: 1,
    since: 1000,
    ...extra,
  });
  const rows = mergeInventory([
    record({}),
    record({
      proxyId: 'p2',
      since: 2000,
      services: [
        { kind: 'db', name: 'orders' },
        { kind: 'ssh', name: 'db-1' },
      ],
    }),
    record({ serverId: serverIdForName('old'), hostname: '', services: [], version: '', upgrader: 'unknown', agent: 'old' }),
  ]);
  t.equal(rows.length, 2);
  t.same(rows[1], {
    server_id: ID,
    hostname: 'db-1.internal',
    services: [
      { kind: 'db', name: 'orders' },
      { kind: 'ssh', name: 'db-1' },
    ],
    version: '3.1.0',
    upgrader: 'unit',
    update_group: 'default',
    agent: 'db-1',
    proxies: ['p1', 'p2'],
    since: new Date(1000).toISOString(),
  });
  t.equal(rows[0]!.agent, 'old', 'sorted by hostname (an undescribed agent has none)');
  const table = inventoryTable(rows).split('\n');
  t.match(
    table[0],
    /^Server ID\s+Hostname\s+Services\s+Version\s+Upgrader\s+Group$/,
    "the platform's columns, in its order, then the group",
  );
  t.match(table[3], new RegExp(`^${ID}\\s+db-1\\.internal\\s+db:orders,ssh:db-1\\s+3\\.1\\.0\\s+unit\\s+default$`));
  t.match(table[2], /^\S+\s+-\s+-\s+-\s+unknown\s+default$/, 'what an agent did not say is shown as -');
  t.equal(parseInventoryRecord(JSON.stringify(record({}))) !== undefined, true);
  t.equal(parseInventoryRecord('{"serverId":1}'), undefined);
  const { updateGroup: _none, ...olderRecord } = record({});
  t.equal(parseInventoryRecord(JSON.stringify(olderRecord))?.updateGroup, 'default', 'a record without a group is in default');
  t.equal(mergeInventory([record({ updateGroup: 'prod' })])[0]!.update_group, 'prod', 'the row shows the group');
  t.equal(parseInventoryRecord('nope'), undefined);
  t.same(recordFor({ name: 'old', description: undefined, since: 5 }, 'p9', 3), {
    serverId: serverIdForName('old'),
    hostname: '',
    services: [],
    version: '',
    upgrader: 'unknown',
    updateGroup: 'default',
    agent: 'old',
    proxyId: 'p9',
    generation: 3,
    since: 5,
  });
  t.equal(
    recordFor({ name: 'a', description: { ...good, serverId: serverIdForName('b') }, since: 5 }, 'p9', 3).serverId,
    serverIdForName('a'),
    "a record is keyed by the certificate name's server ID, whatever the description says",
  );
  t.same(
    fleetCounts(
      [
        { name: 'a', description: good, since: 0 },
        { name: 'b', description: { ...good, upgrader: 'none' }, since: 0 },
        { name: 'c', description: undefined, since: 0 },
      ],
      { GATE_ERR_AGENT_VERSION_INCOMPATIBLE: 2 },
    ),
    {
      byVersion: { '3.1.0': 2, '': 1 },
      byUpgrader: { unit: 1, none: 1, unknown: 1 },
      refused: { GATE_ERR_AGENT_VERSION_INCOMPATIBLE: 2 },
    },
  );
});

import t from 'tap';
import { RouteTable, type RouteQuery } from '../../lib/mux/route-table.js';
import { forward } from '../../lib/handlers/builders.js';
import type { Route, RouteMatch } from '../../lib/mux/types.js';

const h = forward('127.0.0.1:1');
const r = (name: string, match: RouteMatch): Route => ({ name, match, handler: h });

const table = new RouteTable([
  r('web', { protocol: ['tls', 'http1', 'h2'] }),
  r('ssh-tls', { alpn: 'gate-proxy-ssh' }),
  r('tunnel', { alpn: 'gate-reversetunnel' }),
  r('postgres', { alpn: ['gate-postgres', 'gate-postgres-ping', 'postgresql'] }),
  r('mysql', { alpn: 'gate-mysql', alpnPrefix: 'gate-mysql-' }),
  r('kube', { sniPrefix: 'kube-gate-proxy-alpn.' }),
  r('app-exact', { sni: 'app.example.com' }),
  r('app-wild', { sni: '*.example.com' }),
  r('deep-wild', { sni: '*.deep.example.com' }),
  r('bench', { sni: 'bench.local', alpn: 'gate-bench' }),
  r('ssh', { protocol: 'ssh' }),
  r('pg-plain', { protocol: 'postgres' }),
  r('silent', { protocol: 'silent' }),
]);

const tls = (sni: string | undefined, alpn: string[] = []): RouteQuery => ({ protocol: 'tls', sni, alpn });

const cases: Array<[string, RouteQuery, string | undefined]> = [
  ['no SNI, no ALPN: protocol default', tls(undefined), 'web'],
  ['unknown SNI, http ALPN: protocol default', tls('other.test', ['h2', 'http/1.1']), 'web'],
  ['ALPN ssh', tls('proxy.test', ['gate-proxy-ssh']), 'ssh-tls'],
  ['ALPN in client order: postgres first', tls('proxy.test', ['gate-postgres', 'gate-proxy-ssh']), 'postgres'],
  ['ALPN in client order: ssh first', tls('proxy.test', ['gate-proxy-ssh', 'gate-postgres']), 'ssh-tls'],
  ['unknown ALPN then known', tls(undefined, ['x-unknown', 'gate-reversetunnel']), 'tunnel'],
  ['ALPN prefix (versioned mysql)', tls(undefined, ['gate-mysql-OC4wLjMy']), 'mysql'],
  ['ALPN exact mysql', tls(undefined, ['gate-mysql']), 'mysql'],
  ['ping variant', tls(undefined, ['gate-postgres-ping']), 'postgres'],
  ['PG17 direct SSL', tls(undefined, ['postgresql']), 'postgres'],
  ['kube SNI prefix beats ALPN', tls('kube-gate-proxy-alpn.cluster.test', ['h2', 'gate-proxy-ssh']), 'kube'],
  ['exact SNI beats wildcard', tls('app.example.com'), 'app-exact'],
  ['wildcard', tls('other.example.com', ['gate-proxy-ssh']), 'app-wild'],
  ['wildcard matches deeper names', tls('a.b.example.com'), 'app-wild'],
  ['longest wildcard wins', tls('x.deep.example.com'), 'deep-wild'],
  ['wildcard does not match the bare domain', tls('example.com'), 'web'],
  ['SNI and ALPN together', tls('bench.local', ['http/1.1', 'gate-bench']), 'bench'],
  ['SNI without the ALPN the route needs', tls('bench.local', ['http/1.1']), 'web'],
  ['ssh plaintext', { protocol: 'ssh', sni: undefined, alpn: [] }, 'ssh'],
  ['http1 plaintext', { protocol: 'http1', sni: undefined, alpn: [] }, 'web'],
  ['h2 preface', { protocol: 'h2', sni: undefined, alpn: [] }, 'web'],
  ['postgres plaintext', { protocol: 'postgres', sni: undefined, alpn: [] }, 'pg-plain'],
  ['silent', { protocol: 'silent', sni: undefined, alpn: [] }, 'silent'],
];

for (const [name, query, expected] of cases) {
  t.equal(table.select(query)?.name, expected, name);
}

t.test("within the SNI-prefix tier the longest prefix wins before the client's ALPN preference", async (t) => {
  const prefixes = new RouteTable([
    r('kube-any', { sniPrefix: 'kube-gate-proxy-alpn.', alpn: 'h2' }),
    r('kube-prod', { sniPrefix: 'kube-gate-proxy-alpn.prod.' }),
  ]);
  // The client prefers h2, which only the shorter prefix's route names: the longer prefix wins.
  t.equal(prefixes.select(tls('kube-gate-proxy-alpn.prod.example', ['h2']))?.name, 'kube-prod');
  t.equal(prefixes.select(tls('kube-gate-proxy-alpn.dev.example', ['h2']))?.name, 'kube-any');
});

t.test('without a protocol default an unmatched TLS hello has no route (fail closed)', async (t) => {
  const strict = new RouteTable([r('ssh-tls', { alpn: 'gate-proxy-ssh' }), r('kube', { sniPrefix: 'kube-gate-proxy-alpn.' })]);
  t.equal(strict.select(tls(undefined)), undefined);
  t.equal(strict.select(tls('example.com', ['h2'])), undefined);
  t.equal(strict.select({ protocol: 'ssh', sni: undefined, alpn: [] }), undefined, 'TLS-only routes do not take plaintext');
});

t.test('ties go to declaration order', async (t) => {
  const dup = new RouteTable([r('first', { alpn: 'x' }), r('second', { alpn: 'x' })]);
  t.equal(dup.select(tls(undefined, ['x']))?.name, 'first');
});

t.test('SNI is matched case-insensitively on the route side', async (t) => {
  const mixed = new RouteTable([r('a', { sni: 'App.Example.COM' }), r('w', { sni: '*.Other.Test' })]);
  t.equal(mixed.select(tls('app.example.com'))?.name, 'a');
  t.equal(mixed.select(tls('x.other.test'))?.name, 'w');
});

t.test('invalid tables are refused with GATE_ERR_INVALID_ARGUMENT (an argument to a public constructor)', async (t) => {
  const bad: Array<[string, Route[]]> = [
    ['duplicate names', [r('a', { protocol: 'ssh' }), r('a', { protocol: 'http1' })]],
    ['no condition', [r('a', {})]],
    ['SNI on plaintext', [r('a', { sni: 'x', protocol: 'ssh' })]],
    ['ALPN on http1', [r('a', { alpn: 'x', protocol: ['http1', 'h2'] })]],
    ['star in the middle', [r('a', { sni: 'a.*.com' })]],
    ['empty SNI', [r('a', { sni: '' })]],
    ['missing name', [r('', { protocol: 'ssh' })]],
  ];
  for (const [name, routes] of bad) {
    t.throws(() => new RouteTable(routes), { code: 'GATE_ERR_INVALID_ARGUMENT' }, name);
  }
});

t.test('TLS after a Postgres SSLRequest is protocol postgres and still matches TLS conditions', async (t) => {
  const pg = new RouteTable([
    r('web', { protocol: 'tls' }),
    r('pg-direct', { alpn: 'postgresql' }),
    r('pg-db1', { protocol: 'postgres', sni: 'db1.test' }),
    r('pg', { protocol: 'postgres' }),
  ]);
  t.equal(pg.select({ protocol: 'postgres', sni: undefined, alpn: [] })?.name, 'pg');
  t.equal(pg.select({ protocol: 'postgres', sni: 'db1.test', alpn: [] })?.name, 'pg-db1');
  t.equal(pg.select({ protocol: 'postgres', sni: undefined, alpn: ['postgresql'] })?.name, 'pg-direct');
  t.equal(pg.select({ protocol: 'tls', sni: undefined, alpn: [] })?.name, 'web');
});

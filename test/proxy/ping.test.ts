import t from 'tap';
import { parseConfig } from '../../lib/config/load.js';
import { planListeners } from '../../lib/proxy/listener-plan.js';
import { buildPing } from '../../lib/proxy/ping.js';

const FILE = `proxy_service:
  web_listen_addr: 0.0.0.0:3080
  public_addr: [gate.example.com:443, backup.example.com]
  ssh_public_addr: [ssh.example.com:3023, ssh2.example.com]
  tunnel_public_addr: tunnel.example.com:3024
  kube_public_addr: kube.example.com:3026
  postgres_public_addr: pg.example.com:5432
  mysql_public_addr: mysql.example.com:3036
  upstreams:
    ssh: 127.0.0.1:22
    kube: 127.0.0.1:6443
    postgres: 127.0.0.1:5432
    mysql: 127.0.0.1:3306
    mongodb: 127.0.0.1:27017
`;

t.test('multiplex: every listen address is the web address; public addresses are the first of each list', async (t) => {
  const { config } = parseConfig(FILE);
  const ping = buildPing(config, planListeners(config), 'v0.1.0');
  t.same(ping, {
    proxy: {
      kube: { enabled: true, public_addr: 'kube.example.com:3026', listen_addr: '0.0.0.0:3080' },
      ssh: {
        listen_addr: '0.0.0.0:3080',
        tunnel_listen_addr: '0.0.0.0:3080',
        web_listen_addr: '0.0.0.0:3080',
        public_addr: 'gate.example.com:443',
        ssh_public_addr: 'ssh.example.com:3023',
        ssh_tunnel_public_addr: 'tunnel.example.com:3024',
      },
      db: {
        postgres_listen_addr: '0.0.0.0:3080',
        postgres_public_addr: 'pg.example.com:5432',
        mysql_listen_addr: '0.0.0.0:3080',
        mysql_public_addr: 'mysql.example.com:3036',
        mongo_listen_addr: '0.0.0.0:3080',
      },
      tls_routing_enabled: true,
    },
    server_version: 'v0.1.0',
  });
});

t.test('separate: each listen address is its own port', async (t) => {
  const { config } = parseConfig(`auth_service: {proxy_listener_mode: separate}\n${FILE}  mysql_listen_addr: "[::]:13306"\n`);
  const ping = buildPing(config, planListeners(config), '1.2.3');
  t.equal(ping.proxy.tls_routing_enabled, false);
  t.same(ping.proxy.ssh, {
    listen_addr: '0.0.0.0:3023',
    tunnel_listen_addr: '0.0.0.0:3024',
    web_listen_addr: '0.0.0.0:3080',
    public_addr: 'gate.example.com:443',
    ssh_public_addr: 'ssh.example.com:3023',
    ssh_tunnel_public_addr: 'tunnel.example.com:3024',
  });
  t.same(ping.proxy.kube, { enabled: true, public_addr: 'kube.example.com:3026', listen_addr: '0.0.0.0:3026' });
  t.same(ping.proxy.db, {
    postgres_listen_addr: '0.0.0.0:5432',
    postgres_public_addr: 'pg.example.com:5432',
    mysql_listen_addr: '[::]:13306',
    mysql_public_addr: 'mysql.example.com:3036',
    mongo_listen_addr: '0.0.0.0:27017',
  });
  t.equal(ping.server_version, '1.2.3');
});

t.test('disabled protocols and empty public addresses are left out (the tunnel is always served)', async (t) => {
  const { config } = parseConfig('proxy_service:\n  web_listen_addr: 127.0.0.1:3080\n');
  const ping = buildPing(config, planListeners(config), 'v0.1.0');
  t.same(ping.proxy, {
    kube: { enabled: false },
    ssh: { web_listen_addr: '127.0.0.1:3080', tunnel_listen_addr: '127.0.0.1:3080' },
    db: {},
    tls_routing_enabled: true,
  });
  t.notMatch(JSON.stringify(ping), /""/, 'no empty strings in the JSON');
});

t.test('listen addresses follow the plan, so bound ports can be reported', async (t) => {
  const { config } = parseConfig(`auth_service: {proxy_listener_mode: separate}
proxy_service:
  web_listen_addr: 127.0.0.1:0
  listen_addr: 127.0.0.1:0
  upstreams: {ssh: 127.0.0.1:22}
`);
  const plan = planListeners(config);
  const bound = { ...plan, listeners: plan.listeners.map((l, i) => ({ ...l, port: 40000 + i })) };
  const ping = buildPing(config, bound, 'v0.1.0');
  t.equal(ping.proxy.ssh.web_listen_addr, '127.0.0.1:40000');
  t.equal(ping.proxy.ssh.listen_addr, '127.0.0.1:40001');
});

import t from 'tap';
import { parseConfig } from '../../lib/config/load.js';
import { planListeners } from '../../lib/proxy/listener-plan.js';
import { agentJoinHint, agentsInConfig } from '../../lib/proxy/join-hint.js';

const PIN = `sha256:${'ab'.repeat(32)}`;

t.test('one ready-to-paste command per configured agent, with its --allow list; the token read from its file', async (t) => {
  const { config } = parseConfig(`proxy_service:
  web_listen_addr: 0.0.0.0:3080
  upstreams:
    postgres: tunnel:db/10.0.0.5:5432
    mysql: tunnel:db/10.0.0.6:3306
    redis: tunnel:cache/10.0.0.7:6379
    ssh: 127.0.0.1:22
`);
  t.same(
    [...agentsInConfig(config)],
    [
      ['db', ['10.0.0.5:5432', '10.0.0.6:3306']],
      ['cache', ['10.0.0.7:6379']],
    ],
  );
  const hint = agentJoinHint({ config, plan: planListeners(config), caPin: PIN, tokenFile: '/srv/gate data/join-token' });
  const lines = hint.split('\n');
  t.equal(lines[0], `agents: CA pin ${PIN}`);
  t.equal(
    lines[2],
    `  node dist/examples/agent.js --proxy localhost:3080 --ca-pin ${PIN} --token-file '/srv/gate data/join-token' --name db --allow 10.0.0.5:5432 --allow 10.0.0.6:3306 --state-dir .agent-db`,
    'a wildcard listener is reached as localhost; paths with spaces are quoted',
  );
  t.match(lines[3], /--name cache --allow 10\.0\.0\.7:6379 --state-dir \.agent-cache$/);
  t.match(hint, /development token is in \/srv\/gate data\/join-token/);
  const off = agentJoinHint({ config, plan: planListeners(config), caPin: PIN, tokenFile: undefined });
  t.match(
    off,
    /--ca-pin sha256:[0-9a-f]+ --name db /,
    'with the development token off, the command names no token: the agent reads GATE_JOIN_TOKEN',
  );
  t.notMatch(off, /--token/);
  t.match(off, /development token is off \(auth_service\.development_token\): set GATE_JOIN_TOKEN/);
  t.notMatch(off, /join-token/);
});

t.test('separate mode adds the tunnel port; public addresses win; a template when no agent is configured', async (t) => {
  const { config } = parseConfig(`auth_service: {proxy_listener_mode: separate}
proxy_service:
  web_listen_addr: 127.0.0.1:3080
  public_addr: gate.example.com:443
  tunnel_public_addr: tunnel.example.com:3024
`);
  const hint = agentJoinHint({ config, plan: planListeners(config), caPin: PIN, tokenFile: 'join-token', agentCommand: 'gate-mux agent' });
  t.match(hint, /start an agent \(no upstream is tunnel:<agent>\/<host:port> yet\)/);
  t.match(
    hint,
    `  gate-mux agent --proxy gate.example.com:443 --tunnel-addr tunnel.example.com:3024 --ca-pin ${PIN} --token-file join-token --name my-agent --allow HOST:PORT --state-dir .agent-my-agent`,
  );
  const local = parseConfig(`auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  web_listen_addr: 127.0.0.1:3080\n`).config;
  t.match(
    agentJoinHint({ config: local, plan: planListeners(local), caPin: PIN, tokenFile: 't' }),
    /--proxy 127\.0\.0\.1:3080 --tunnel-addr 127\.0\.0\.1:3024 /,
  );
});

// The platform's proxy front door, runnable: `npm start` (embedded default examples/gate.yaml).
//
//   node dist/examples/proxy.js [--config FILE] [--pid-file FILE] [--log-level info|debug|warn]
//
// With TLS routing (the default) one port, 127.0.0.1:3080, serves web (GET /webapi/ping, the
// automatic-upgrade version channels), SSH, reverse tunnels, Kubernetes and every database.
// Without https_keypairs it makes a development CA in data_dir at first start and issues the
// server certificate from it. SIGHUP reloads the configuration and certificates without dropping
// established connections; SIGTERM (or Ctrl-C) drains for 10 s and exits.
import { readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { loadConfig } from '../lib/config/load.js';
import { formatAddress } from '../lib/config/address.js';
import { GateProxy } from '../lib/proxy/gate-proxy.js';
import { agentJoinHint } from '../lib/proxy/join-hint.js';

const DEFAULT_CONFIG = fileURLToPath(new URL('../../examples/gate.yaml', import.meta.url));
const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const { values } = parseArgs({
  options: {
    config: { type: 'string', default: DEFAULT_CONFIG },
    'pid-file': { type: 'string' },
    'log-level': { type: 'string', default: 'info' },
  },
});
const configPath = values.config!;
const logger = pino({ level: values['log-level'] ?? 'info' });

async function load() {
  const { config, warnings } = await loadConfig(configPath);
  for (const warning of warnings) logger.warn({ source: configPath }, warning);
  return config;
}

let proxy: GateProxy;
try {
  proxy = await GateProxy.start({ config: await load(), version, logger });
} catch (err) {
  console.error(`gate-mux proxy: ${(err as Error).message}`);
  process.exit(1);
}
const pidFile = values['pid-file'];
if (pidFile) await writeFile(pidFile, `${process.pid}\n`);

const plan = proxy.plan;
const shared = plan.listeners[0]!;
const web = formatAddress(shared);
console.log(`gate-mux proxy ${version} (${plan.mode === 'multiplex' ? 'TLS routing on one port' : 'separate ports'}), config ${configPath}`);
for (const l of plan.listeners) console.log(`  listening on ${formatAddress(l)} (${l.name}: ${l.routes.map((r) => r.name).join(', ')})`);
console.log(agentJoinHint({ config: proxy.currentConfig, plan, caPin: proxy.caPin, tokenFile: proxy.devTokenFile }));
if (proxy.caFile) {
  console.log(`  development CA: ${proxy.caFile}`);
  console.log(`try: curl --cacert ${proxy.caFile} https://${web}/webapi/ping`);
} else {
  console.log(`try: curl https://${web}/webapi/ping`);
}

process.on('SIGHUP', () => {
  load()
    .then((config) => proxy.reload(config))
    .then(() => console.log('configuration and certificates reloaded'))
    .catch((err: Error) => logger.error({ code: (err as { code?: string }).code }, `reload failed, still running the previous configuration: ${err.message}`));
});

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: draining connections (up to 10 s)`);
  void proxy
    .close({ graceMs: 10_000 })
    .then(() => (pidFile ? rm(pidFile, { force: true }) : undefined))
    .then(() => process.exit(0));
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

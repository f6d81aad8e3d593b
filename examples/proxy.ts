// The proxy built from the library, in the fewest lines: load a configuration, start, reload on
// SIGHUP, drain on SIGTERM. `npx gate-mux proxy` (lib/cli/proxy.ts, what `npm start` runs) is
// the full command, with a pid file, a drain timeout and terminal-friendly logs.
//
//   npm run build && node dist/examples/proxy.js [config.yaml]
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { GateProxy, formatAddress, loadConfig } from 'gate-mux/proxy';

const path = process.argv[2] ?? fileURLToPath(new URL('../../examples/gate.yaml', import.meta.url));
const logger = pino();

const load = async () => {
  const { config, warnings } = await loadConfig(path);
  for (const warning of warnings) logger.warn(warning);
  return config;
};

const proxy = await GateProxy.start({ config: await load(), version: '0.0.0-example', logger });
for (const listener of proxy.listening) console.log(`listening on ${formatAddress(listener)} (${listener.name})`);
if (proxy.caFile) console.log(`development CA: ${proxy.caFile}`);

process.on('SIGHUP', () => {
  // A configuration that does not load or bind leaves the running one untouched.
  load()
    .then((config) => proxy.reload(config))
    .catch((err: Error) => logger.error(`reload failed: ${err.message}`));
});
process.once('SIGTERM', () => {
  void proxy.close({ graceMs: 10_000 }).then(() => process.exit(0));
});

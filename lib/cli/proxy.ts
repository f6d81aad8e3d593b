/**
 * `gate-mux proxy`: the platform's front door. On the embedded default configuration (the
 * package's examples/gate.yaml) one port, 127.0.0.1:3080, serves web (GET /webapi/ping, the
 * automatic-upgrade version channels), SSH, reverse tunnels, Kubernetes and every database.
 * Without https_keypairs it makes a development CA in data_dir at first start and issues the
 * server certificate from it.
 */
import { realpathSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { relative, sep } from 'node:path';
import type { Logger } from 'pino';
import { loadConfig } from '../config/load.js';
import { formatAddress } from '../config/address.js';
import { GateProxy } from '../proxy/gate-proxy.js';
import { agentJoinHint } from '../proxy/join-hint.js';
import { loggerFromOptions } from './log.js';
import { defaultConfigPath, packageVersion } from './package-info.js';
import { parseCommand, usageError } from './usage.js';
import { proxyParts } from '../proxy/proxy-parts.js';

export const PROXY_USAGE = `usage: gate-mux proxy [--config FILE] [--pid-file FILE] [--drain-timeout SECONDS]
                      [--log-level LEVEL] [--log-format pretty|json]

Runs the proxy. Signals: SIGHUP reloads the configuration and certificates (all or nothing: a
file that does not load, or a listener that cannot bind, leaves the running configuration
untouched); SIGTERM or SIGINT stop accepting, let open connections finish for the drain timeout,
then exit 0.

  --config FILE          YAML configuration (default: the embedded examples/gate.yaml)
  --pid-file FILE        write the process id here while running
  --drain-timeout S      seconds open connections get to finish on SIGTERM (default 10)
  --log-level LEVEL      trace, debug, info (default), warn, error, fatal or silent
  --log-format FORMAT    pretty (default on a terminal) or json (default otherwise)
`;

export async function main(argv: string[]): Promise<number> {
  const parsed = parseCommand(
    {
      args: argv,
      options: {
        config: { type: 'string' },
        'pid-file': { type: 'string' },
        'drain-timeout': { type: 'string', default: '10' },
        'log-level': { type: 'string', default: 'info' },
        'log-format': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    },
    PROXY_USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  if (values.help) {
    process.stdout.write(PROXY_USAGE);
    return 0;
  }
  const logger = loggerFromOptions(values['log-level']!, values['log-format']);
  if (logger instanceof Error) return usageError(logger.message, PROXY_USAGE);
  const drainSeconds = Number(values['drain-timeout']);
  if (!(drainSeconds >= 0)) return usageError(`--drain-timeout ${values['drain-timeout']}: expected seconds`, PROXY_USAGE);
  const configPath = values.config ?? defaultConfigPath;
  const pidFile = values['pid-file'];

  let proxy: GateProxy;
  try {
    proxy = await GateProxy.start({ config: await load(configPath, logger), version: packageVersion, logger });
  } catch (err) {
    process.stderr.write(`gate-mux proxy: ${describe(err)}\n`);
    return 1;
  }
  if (pidFile) await writeFile(pidFile, `${process.pid}\n`);
  printBanner(proxy, configPath);

  const onReload = (): void => {
    load(configPath, logger)
      .then((config) => proxy.reload(config))
      .then(() => logger.info({ config: configPath }, 'configuration and certificates reloaded'))
      .catch((err: unknown) =>
        logger.error(
          { code: (err as { code?: string }).code },
          `reload failed, still running the previous configuration: ${(err as Error).message}`,
        ),
      );
  };
  process.on('SIGHUP', onReload);
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  process.removeListener('SIGHUP', onReload);
  console.log(`${signal}: draining connections (up to ${drainSeconds} s)`);
  // Draining first: the cluster stops choosing this proxy and agents move elsewhere
  // while open connections finish.
  await proxy.drain();
  await proxy.close({ graceMs: drainSeconds * 1000 });
  if (pidFile) await rm(pidFile, { force: true });
  logger.flush?.();
  return 0;
}

async function load(path: string, logger: Logger) {
  const { config, warnings } = await loadConfig(path);
  for (const warning of warnings) logger.warn({ source: path }, warning);
  return config;
}

function printBanner(proxy: GateProxy, configPath: string): void {
  const { plan } = proxyParts(proxy);
  const web = formatAddress(plan.listeners[0]!);
  console.log(
    `gate-mux proxy ${packageVersion} (${plan.mode === 'multiplex' ? 'TLS routing on one port' : 'separate ports'}), config ${configPath}`,
  );
  for (const l of plan.listeners) console.log(`  listening on ${formatAddress(l)} (${l.name}: ${l.routes.map((r) => r.name).join(', ')})`);
  const { cap, from } = proxy.connectionCap;
  console.log(`  at most ${cap} open connections: ${from}`);
  const diag = proxy.diagAddress;
  if (diag) console.log(`  diagnostics on http://${formatAddress({ host: diag.address, port: diag.port })} (/healthz, /readyz, /metrics)`);
  console.log(
    agentJoinHint({ config: proxy.currentConfig, plan, caPin: proxy.caPin, tokenFile: proxy.devTokenFile, agentCommand: agentCommand() }),
  );
  if (proxy.caFile) {
    console.log(`  development CA: ${proxy.caFile}`);
    console.log(`try: curl --cacert ${proxy.caFile} https://${web}/webapi/ping`);
  } else {
    console.log(`try: curl https://${web}/webapi/ping`);
  }
}

function describe(err: unknown): string {
  const code = (err as { code?: string }).code;
  return `${code ? `${code}: ` : ''}${err instanceof Error ? err.message : String(err)}`;
}

/**
 * How to run the agent from the same installation as this proxy: `npx gate-mux agent` where
 * gate-mux is an installed package, `node <path>/gate-mux.js agent` in a checkout (where npx would
 * look for the package on the registry instead).
 */
function agentCommand(): string {
  const script = process.argv[1] ? realpathSync(process.argv[1]) : '';
  if (script.includes(`${sep}node_modules${sep}`)) return 'npx gate-mux agent';
  // The Debian and RPM packages' tree, run by /usr/bin/gate-mux on the package's own runtime:
  // there is no `node` on PATH to name (issue 38).
  if (script.startsWith('/usr/lib/gate-mux/dist/')) return 'gate-mux agent';
  const path = relative(process.cwd(), script);
  return `node ${path.startsWith('..') ? script : path} agent`;
}

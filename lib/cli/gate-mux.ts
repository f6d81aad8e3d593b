#!/usr/bin/env node
/**
 * The `gate-mux` command. Each subcommand is its own module, loaded only when asked for, so that
 * `gate-mux local-proxy` starts without the proxy's certificate and YAML packages.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { packageVersion } from './package-info.js';
import { usageError } from './usage.js';

interface Command {
  summary: string;
  load: () => Promise<{ main(argv: string[]): Promise<number> }>;
}

const COMMANDS: Record<string, Command> = {
  proxy: { summary: 'run the proxy (one port for web, SSH, tunnels, Kubernetes and databases)', load: () => import('./proxy.js') },
  'local-proxy': {
    summary: 'carry a local client (psql, redis-cli, ssh, ...) to the proxy inside TLS with an ALPN',
    load: () => import('./local-proxy.js'),
  },
  agent: { summary: 'join the proxy and hold a reverse tunnel for the resources on its --allow list', load: () => import('./agent.js') },
  upgrade: { summary: 'the updater: dry-run, run, export-schedule (the same as gate-upgrade)', load: () => import('./gate-upgrade.js') },
  inventory: {
    summary: "list the cluster's agents: inventory ls [--upgrader=none]",
    load: () => import('./inventory.js'),
  },
  create: {
    summary: 'create resources from a manifest (cluster_maintenance_config, role, autoupdate_config, autoupdate_version); -f overwrites',
    load: () => import('./admin.js').then((m) => ({ main: m.createMain })),
  },
  get: {
    summary: 'print resources: get KIND[/NAME] [--format yaml|json]',
    load: () => import('./admin.js').then((m) => ({ main: m.getMain })),
  },
  rm: { summary: 'remove a resource: rm KIND/NAME', load: () => import('./admin.js').then((m) => ({ main: m.rmMain })) },
  status: {
    summary: 'the cluster name, version, CA pin, proxies and agents',
    load: () => import('./admin.js').then((m) => ({ main: m.statusMain })),
  },
  autoupdate: {
    summary: 'the managed rollout of agent versions: autoupdate agents status|report|start-update|mark-done|rollback',
    load: () => import('./autoupdate.js'),
  },
  users: {
    summary: 'admin users and their identity files: users add|update|rm|renew',
    load: () => import('./admin.js').then((m) => ({ main: m.usersMain })),
  },
};

export const USAGE = `usage: gate-mux <command> [options]      (gate-mux <command> --help for its options)

commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(13)} ${c.summary}`)
  .join('\n')}

  --version      print the version, then the Node.js runtime's version and path
`;

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name === undefined ? 2 : 0;
  }
  if (name === '--version' || name === '-v') {
    // The version alone on the first line (gate-upgrade and scripts read it there), then the
    // runtime it runs on: the package's own Node.js when installed from a package (issue 38).
    process.stdout.write(`${packageVersion}\nNode.js ${process.version} (${process.execPath})\n`);
    return 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) return usageError(`gate-mux: unknown command '${name}'`, USAGE);
  return (await command.load()).main(rest);
}

// Run as a program (npm links bins through node_modules/.bin, hence the realpath), not imported.
// A command's exit code ends the process even if a library left a timer or socket behind.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href)
  process.exit(await main(process.argv.slice(2)));

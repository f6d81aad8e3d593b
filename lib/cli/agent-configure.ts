// `gate-mux agent configure`: writes the agent's configuration file (default /etc/gate/agent.yaml)
// from flags, then checks it reads back, so what the unit starts from is known good.
import { chmod, mkdir, open, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { renderAgentConfig } from '../config/agent-config-text.js';
import {
  DEFAULT_AGENT_CONFIG_PATH,
  PACKAGE_MANAGERS,
  RESOURCE_KINDS,
  parseAgentConfig,
  type AgentResource,
  type PackageManager,
  type ResourceKind,
} from '../config/agent-config.js';
import { ErrorCodes, GateError, isGateError } from '../errors.js';
import { AGENT_JOIN_OPTIONS, joinTokenFrom } from './agent-flags.js';
import { agentSchemaPath } from './package-info.js';
import { DEFAULT_UPDATE_GROUP, isValidUpdateGroup } from '../wire/names.js';

export const CONFIGURE_USAGE = `usage: gate-mux agent configure --proxy HOST:PORT --name NAME [--token-file FILE --ca-pin sha256:HEX]
         [--allow HOST:PORT ...] [--resource KIND:NAME=HOST:PORT[@PUBLIC_ADDR,...] ...]
         [--upgrade-channel NAME] [--update-group NAME] [--package-manager apt|dnf|yum|zypper] [--state-dir DIR]
         [--tunnel-addr HOST:PORT] [--server-name NAME] [--output FILE] [--force]

Writes a commented agent configuration file (default ${DEFAULT_AGENT_CONFIG_PATH}, mode 0600: it
holds the join token until the first join) that \`gate-mux agent --config FILE\` and \`gate-upgrade\`
read. An existing file is kept unless --force. KIND is ${RESOURCE_KINDS.join(', ')}. --update-group
names the rollout group the agent reports (updater.group; default ${DEFAULT_UPDATE_GROUP}).`;

/** `db:orders=10.0.0.5:5432@orders.example.com,10.1.2.3` → a resource; a GATE_ERR_INVALID_ARGUMENT says what is wrong. */
export function parseResourceFlag(text: string): AgentResource | GateError {
  const m = /^([a-z]+):([^=]+)=([^@]+)(?:@(.+))?$/.exec(text);
  if (!m)
    return new GateError(ErrorCodes.INVALID_ARGUMENT, `--resource ${JSON.stringify(text)}: expected KIND:NAME=HOST:PORT[@PUBLIC_ADDR,...]`);
  const [, kind, name, target, publicAddr] = m as unknown as [string, string, string, string, string | undefined];
  if (!(RESOURCE_KINDS as readonly string[]).includes(kind))
    return new GateError(
      ErrorCodes.INVALID_ARGUMENT,
      `--resource ${JSON.stringify(text)}: kind ${kind} is not one of ${RESOURCE_KINDS.join(', ')}`,
    );
  return {
    kind: kind as ResourceKind,
    name,
    target,
    publicAddr: publicAddr
      ? publicAddr
          .split(',')
          .map((a) => a.trim())
          .filter(Boolean)
      : [],
  };
}

export async function configure(argv: string[], io: { out: (l: string) => void; err: (l: string) => void }): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        ...AGENT_JOIN_OPTIONS,
        allow: { type: 'string', multiple: true, default: [] },
        resource: { type: 'string', multiple: true, default: [] },
        'upgrade-channel': { type: 'string' },
        'package-manager': { type: 'string' },
        output: { type: 'string', default: DEFAULT_AGENT_CONFIG_PATH },
        force: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    io.err(`agent configure: ${(err as Error).message}\n${CONFIGURE_USAGE}`);
    return 2;
  }
  if (values.help) {
    io.out(CONFIGURE_USAGE);
    return 0;
  }
  const usage = (message: string): number => {
    io.err(`agent configure: ${message}\n${CONFIGURE_USAGE}`);
    return 2;
  };
  if (!values.proxy || !values.name) return usage('--proxy and --name are required');
  let token: string | undefined;
  try {
    token = await joinTokenFrom(values, process.env, (line) => io.err(`agent configure: ${line}`));
  } catch (err) {
    return usage((err as Error).message);
  }
  const manager = values['package-manager'];
  if (manager !== undefined && !(PACKAGE_MANAGERS as readonly string[]).includes(manager))
    return usage(`--package-manager ${manager}: expected ${PACKAGE_MANAGERS.join(', ')}`);
  const group = values['update-group'];
  if (group !== undefined && !isValidUpdateGroup(group))
    return usage(`--update-group ${JSON.stringify(group)}: letters, digits, ".", "_", "-", at most 64`);
  const resources: AgentResource[] = [];
  for (const flag of values.resource ?? []) {
    const parsed = parseResourceFlag(flag);
    if (parsed instanceof GateError) return usage(parsed.message);
    resources.push(parsed);
  }
  const text = renderAgentConfig({
    proxy: values.proxy,
    token,
    caPin: values['ca-pin'],
    name: values.name,
    allow: values.allow ?? [],
    resources,
    stateDir: values['state-dir'],
    tunnelAddr: values['tunnel-addr'],
    serverName: values['server-name'],
    upgradeChannel: values['upgrade-channel'],
    updateGroup: group,
    packageManager: manager as PackageManager | undefined,
    // This installation's copy, so an editor on the machine that holds the file finds it offline.
    schemaUrl: agentSchemaPath,
  });
  const output = values.output!;
  try {
    // The same checks `gate-mux agent --config` applies, before anything is written.
    const { warnings } = parseAgentConfig(text, output);
    for (const warning of warnings) io.err(`agent configure: warning: ${warning}`);
    await writePrivateFile(output, text, values.force === true);
  } catch (err) {
    io.err(`agent configure: ${isGateError(err) ? `${err.code}: ` : ''}${(err as Error).message}`);
    return 1;
  }
  io.out(`wrote ${output}; start the agent with: systemctl enable --now gate-agent`);
  return 0;
}

/**
 * Writes `text` to `path` with mode 0600 from the first byte (a temporary file opened 0600, then
 * renamed), so the token is never readable by others, not even for a moment. Without `replace`, an
 * existing file is an error (EEXIST), so a second run cannot silently drop a hand-edited file.
 */
async function writePrivateFile(path: string, text: string, replace: boolean): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o755 });
  const temp = `${path}.${process.pid}.tmp`;
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await chmod(temp, 0o600);
    if (!replace) {
      const existing = await open(path, 'wx', 0o600).catch((err: NodeJS.ErrnoException) => err);
      if (existing instanceof Error) {
        if (existing.code === 'EEXIST') throw new GateError(ErrorCodes.INVALID_ARGUMENT, `${path} exists; --force replaces it`);
        throw existing;
      }
      await existing.close();
    }
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}

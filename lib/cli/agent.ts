#!/usr/bin/env node
// The agent: joins the proxy once with a token and a CA pin, keeps its key and short-lived
// certificate in a state directory, holds the reverse tunnel, renews before expiry, and serves the
// targets its --allow list names. `gate-mux agent --help` (or node dist/examples/agent.js --help).
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { AGENT_JOIN_OPTIONS, joinTokenFrom } from './agent-flags.js';
import { loggerFromOptions } from './log.js';
import { reportToUpdater } from './agent-updater-files.js';
import { dialTls } from '../client/dial-tls.js';
import { ErrorCodes, GateError, isGateError } from '../errors.js';
import type { Logger } from '../log.js';
import { startAgent, type AgentConnectedEvent, type TunnelAgent } from '../tunnel/agent.js';
import { DEFAULT_CONNECTION_COUNT } from '../tunnel/agent-pool.js';
import { readAgentState, writeAgentState, type StoredIdentity } from '../tunnel/agent-state.js';
import { parseService, type AgentService } from '../tunnel/agent-description.js';
import { SERVICE_KINDS } from '../vocabulary/service-kinds.js';
import { joinProxy, renewalTime, renewIdentity, type JoinEndpoint } from '../tunnel/join-client.js';
import { allowedTargets, loadAgentConfig, servicesOf, type AgentFileConfig } from '../config/agent-config.js';
import { ALPN_REVERSE_TUNNEL_FRAMED } from '../wire/names.js';

/**
 * For tests only: the version the agent reports instead of its package's. A rollout test runs
 * agents at several versions from one build; nothing but a test should set it (the proxy's version
 * rule and the rollout both trust what the agent reports).
 */
export const TEST_VERSION_ENV = 'GATE_MUX_TEST_AGENT_VERSION';

const USAGE = `usage:
  agent --config FILE [flags that override it]     (the packaged unit: --config /etc/gate/agent.yaml)
  agent configure --proxy HOST:PORT --name NAME ...  (write that file; agent configure --help)
  agent --proxy HOST:PORT --name NAME --allow HOST:PORT [--allow ...] --state-dir DIR
        [--token-file FILE --ca-pin sha256:HEX]  (first start: join; later starts reuse DIR)
  agent --proxy HOST:PORT --name NAME --cert FILE --key FILE --ca FILE --allow HOST:PORT [...]
                                                  (a pre-issued identity; no joining or renewal)
  agent --proxy HOST:PORT [--ca FILE | --insecure]  (report the way to the proxy and exit)
options:
  --config FILE            read these settings from an agent configuration file (YAML); flags win
  --token-file FILE        the join token, read from FILE (its first line); or set GATE_JOIN_TOKEN.
                           --token TOKEN works too, but puts the token where \`ps\` shows it
  --tunnel-addr HOST:PORT  the tunnel port when the proxy runs separate ports (default: --proxy)
  --server-name NAME       the name the proxy's certificate is checked for (default: the proxy host)
  --service KIND:NAME      a service this agent provides, for the proxies' inventory (repeatable;
                           KIND one of ${SERVICE_KINDS.join(', ')})
  --connection-count N     tunnels to keep, each to a distinct proxy of a cluster behind a load
                           balancer (default 2); fewer when fewer proxies exist, one to a proxy
                           that runs alone
  --update-group NAME      the rollout group it reports (default: the file's updater.group, else default)
  --timeout-ms N           dial and handshake deadline (default 10000)
  --log-level LEVEL        pino level for the log on stderr (default warn)
  --log-format FORMAT      pretty (default on a terminal) or json (default otherwise)
The server ID the inventory lists is kept in the state directory (made at the first start); an
agent without one uses an ID derived from its name. GATE_EXT_UPGRADER names its updater (\`unit\`
when the updater package's unit sets it; \`none\` when unset). ${TEST_VERSION_ENV}, for tests only,
is the version it reports instead of its package's (a rollout test's agents at several versions).
HTTPS_PROXY / HTTP_PROXY / NO_PROXY choose how the proxy is reached. SIGTERM or Ctrl-C closes the
tunnel with a GOAWAY and exits 0.`;

/** Milliseconds to wait before retrying a failed renewal (the certificate's last third allows many). */
const RENEW_RETRY_MS = 60_000;
/** More tunnels than this is a typo, not a cluster: each one is a TLS connection held open. */
const MAX_CONNECTION_COUNT = 64;
/** Open streams get this long to finish after SIGTERM before the tunnel is torn down. */
const STOP_GRACE_MS = 5_000;

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

const defaultIo: Io = { out: (l) => console.log(l), err: (l) => console.error(l) };

function failure(err: unknown): string {
  return `agent: ${isGateError(err) ? err.code : 'error'}: ${(err as Error).message}`;
}

/** The flag values a configuration file gives, for each flag the command line left unset. */
type FlagValues = Record<string, string | boolean | string[] | undefined>;
function withConfigFile<T extends FlagValues>(values: T, config: AgentFileConfig): T {
  const fromFile: FlagValues = {
    proxy: config.proxy,
    'tunnel-addr': config.tunnelAddr,
    'server-name': config.serverName,
    name: config.name,
    'state-dir': config.stateDir,
    token: config.token,
    'ca-pin': config.caPin,
    cert: config.certFile,
    key: config.keyFile,
    ca: config.caFile,
    'timeout-ms': config.dialTimeoutMs === undefined ? undefined : String(config.dialTimeoutMs),
    'connection-count': config.connectionCount === undefined ? undefined : String(config.connectionCount),
    'log-level': config.logLevel,
    'update-group': config.updater.group,
  };
  const merged: FlagValues = { ...values };
  for (const [flag, value] of Object.entries(fromFile)) if (merged[flag] === undefined && value !== undefined) merged[flag] = value;
  // --allow adds to the file's list rather than replacing it: a flag can open one more target for a
  // test without copying every resource of the file.
  merged.allow = [...new Set([...allowedTargets(config), ...((values.allow as string[] | undefined) ?? [])])];
  // Each resource is announced as a --service KIND:NAME would announce it, beside the flags' own.
  merged.service = [...servicesOf(config).map((s) => `${s.kind}:${s.name}`), ...((values.service as string[] | undefined) ?? [])];
  return merged as T;
}

/** Report-only mode: dial the tunnel endpoint the way the agent does and say which way it went. */
async function reportRoute(
  values: { proxy: string; ca?: string | undefined; insecure?: boolean | undefined; serverName?: string | undefined; timeoutMs: number },
  io: Io,
): Promise<number> {
  const { socket, via, alpn } = await dialTls(values.proxy, {
    alpn: [ALPN_REVERSE_TUNNEL_FRAMED],
    requireAlpn: true,
    ...(values.serverName ? { serverName: values.serverName } : {}),
    ...(values.ca ? { ca: await readFile(values.ca) } : {}),
    rejectUnauthorized: !values.insecure,
    timeoutMs: values.timeoutMs,
  });
  io.out(`connected to ${values.proxy} ${via ? `via ${via.display} (from ${via.source})` : 'direct'}, ALPN ${alpn ?? 'none'}`);
  socket.end();
  return 0;
}

/** The identity to start with: the state directory's, else a new one by joining (then saved). */
async function identityFor(
  endpoint: JoinEndpoint,
  opts: { name: string; stateDir: string; token?: string | undefined; caPin?: string | undefined },
  io: Io,
): Promise<StoredIdentity> {
  const stored = await readAgentState(opts.stateDir);
  if (stored && stored.name !== opts.name) {
    throw new GateError(
      ErrorCodes.AGENT_STATE,
      `${opts.stateDir} holds the identity of agent ${JSON.stringify(stored.name)}, not ${JSON.stringify(opts.name)}`,
    );
  }
  if (stored && stored.expiresAt > Date.now()) return stored;
  if (!opts.token || !opts.caPin) {
    const why = stored
      ? `the certificate in ${opts.stateDir} expired at ${new Date(stored.expiresAt).toISOString()}`
      : `${opts.stateDir} holds no identity yet`;
    throw new GateError(ErrorCodes.AGENT_STATE, `${why}: join with --token-file (or GATE_JOIN_TOKEN) and --ca-pin`);
  }
  const joined = await joinProxy(endpoint, { token: opts.token, name: opts.name, caPin: opts.caPin });
  await writeAgentState(opts.stateDir, joined);
  io.out(`joined as ${opts.name}; identity kept in ${opts.stateDir}`);
  const saved = await readAgentState(opts.stateDir);
  if (!saved) throw new GateError(ErrorCodes.AGENT_STATE, `${opts.stateDir}: the identity just written cannot be read back`);
  return saved;
}

/**
 * Renews at two thirds of each certificate's life, saves the new identity and hands it to the
 * agent for its next connection; a failed renewal is retried every minute. Returns a stop function.
 */
function keepRenewed(
  agent: TunnelAgent,
  endpoint: JoinEndpoint,
  stateDir: string,
  first: StoredIdentity,
  io: Io,
  log: Logger,
  renewAt: (certPem: string) => number,
  onExpired: (error: GateError) => void,
): () => void {
  let current = first;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = (at: number): void => {
    if (stopped) return;
    timer = setTimeout(renew, Math.max(0, Math.min(at - Date.now(), 2 ** 31 - 1)));
    timer.unref();
  };
  const renew = (): void => {
    renewIdentity(endpoint, current)
      .then(async (next) => {
        await writeAgentState(stateDir, next);
        const saved = await readAgentState(stateDir);
        if (!saved) throw new GateError(ErrorCodes.AGENT_STATE, `${stateDir}: the renewed identity cannot be read back`);
        current = saved;
        agent.setIdentity(saved);
        io.out(`certificate renewed, valid until ${new Date(saved.expiresAt).toISOString()}`);
        schedule(renewAt(saved.cert));
      })
      .catch((err: unknown) => {
        // Past expiry no renewal can succeed (it needs a valid certificate): only a new join can.
        if (current.expiresAt <= Date.now()) {
          onExpired(
            new GateError(
              ErrorCodes.AGENT_STATE,
              `the certificate in ${stateDir} expired at ${new Date(current.expiresAt).toISOString()} before it could be renewed (${(err as Error).message}): join again with --token-file (or GATE_JOIN_TOKEN) and --ca-pin`,
            ),
          );
          return;
        }
        log.warn(
          { code: isGateError(err) ? err.code : undefined },
          `renewal failed, retrying in ${RENEW_RETRY_MS / 1000} s: ${(err as Error).message}`,
        );
        schedule(Date.now() + RENEW_RETRY_MS);
      });
  };
  schedule(renewAt(first.cert));
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** Resolves on SIGTERM / SIGINT (handlers removed afterwards). */
function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (signal: string): void => {
      process.removeListener('SIGTERM', onTerm);
      process.removeListener('SIGINT', onInt);
      resolve(signal);
    };
    const onTerm = (): void => on('SIGTERM');
    const onInt = (): void => on('SIGINT');
    process.once('SIGTERM', onTerm);
    process.once('SIGINT', onInt);
  });
}

const RELOAD = Symbol('reload');

/**
 * SIGHUP (systemctl reload gate-agent): resolves `requested` once the configuration file (when
 * there is one) loads; a file that does not is reported and the agent goes on as it was.
 */
function untilReload(configPath: string | undefined, io: Io): { requested: Promise<typeof RELOAD>; cancel: () => void } {
  let onHup = (): void => {};
  const requested = new Promise<typeof RELOAD>((resolve) => {
    onHup = (): void => {
      if (!configPath) return resolve(RELOAD);
      loadAgentConfig(configPath).then(
        () => resolve(RELOAD),
        (err: unknown) => io.err(`${failure(err)}\nagent: reload refused, still running the previous configuration`),
      );
    };
    process.on('SIGHUP', onHup);
  });
  return { requested, cancel: () => process.removeListener('SIGHUP', onHup) };
}

export interface AgentCliHooks {
  io?: Io;
  /** Resolves when the agent should stop (default: SIGTERM or SIGINT). */
  stopSignal?: Promise<unknown>;
  env?: NodeJS.ProcessEnv;
  /** When to renew a certificate (default `renewalTime`: two thirds of its validity). */
  renewAt?: (certPem: string) => number;
}

export async function main(argv: string[], hooks: AgentCliHooks = {}): Promise<number> {
  const io = hooks.io ?? defaultIo;
  if (argv[0] === 'configure') return (await import('./agent-configure.js')).configure(argv.slice(1), io);
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        ...AGENT_JOIN_OPTIONS,
        config: { type: 'string' },
        allow: { type: 'string', multiple: true },
        service: { type: 'string', multiple: true },
        cert: { type: 'string' },
        key: { type: 'string' },
        ca: { type: 'string' },
        insecure: { type: 'boolean', default: false },
        'timeout-ms': { type: 'string' },
        'connection-count': { type: 'string' },
        'log-level': { type: 'string' },
        'log-format': { type: 'string' },
      },
    }));
  } catch (err) {
    io.err(`agent: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  // The command line's token, file or environment first: each wins over the configuration file's.
  try {
    values.token = await joinTokenFrom(values, hooks.env ?? process.env, (line) => io.err(`agent: ${line}`));
  } catch (err) {
    io.err(failure(err));
    return 2;
  }
  if (values.config) {
    try {
      const { config, warnings } = await loadAgentConfig(values.config);
      for (const warning of warnings) io.err(`agent: warning: ${warning}`);
      values = withConfigFile(values, config);
    } catch (err) {
      io.err(failure(err));
      return 1;
    }
  }
  values['timeout-ms'] ??= '10000';
  values['connection-count'] ??= String(DEFAULT_CONNECTION_COUNT);
  const timeoutMs = Number(values['timeout-ms']);
  const connectionCount = Number(values['connection-count']);
  if (!Number.isInteger(connectionCount) || connectionCount < 1 || connectionCount > MAX_CONNECTION_COUNT) {
    io.err(
      `agent: --connection-count takes a whole number from 1 to ${MAX_CONNECTION_COUNT}, not ${JSON.stringify(values['connection-count'])}\n${USAGE}`,
    );
    return 2;
  }
  let services: AgentService[];
  try {
    services = (values.service ?? []).map(parseService);
  } catch (err) {
    io.err(`agent: --service: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  // Logs go to stderr; tokens and keys are never passed to it.
  const logger = loggerFromOptions(values['log-level'] ?? 'warn', values['log-format'], 2);
  if (!values.proxy || !Number.isInteger(timeoutMs) || timeoutMs <= 0 || logger instanceof Error) {
    io.err(logger instanceof Error ? `agent: ${logger.message}\n${USAGE}` : USAGE);
    return 2;
  }
  const serverName = values['server-name'];
  try {
    if (!values.name)
      return await reportRoute({ proxy: values.proxy, ca: values.ca, insecure: values.insecure, serverName, timeoutMs }, io);
  } catch (err) {
    io.err(failure(err));
    return 1;
  }
  const endpoint: JoinEndpoint = {
    proxy: values.proxy,
    ...(serverName ? { serverName } : {}),
    ...(hooks.env ? { env: hooks.env } : {}),
    timeoutMs,
    logger,
  };
  let agent: TunnelAgent;
  let stopRenewal = (): void => {};
  let stopReporting = async (): Promise<void> => {};
  let expired: GateError | undefined;
  let onExpired = (): void => {};
  const expiry = new Promise<void>((resolve) => (onExpired = resolve));
  try {
    let identity: { cert: string | Buffer; key: string | Buffer; ca: string | Buffer };
    let stored: StoredIdentity | undefined;
    if (values.cert) {
      if (!values.key || !values.ca) throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'a pre-issued identity needs --cert, --key and --ca');
      identity = { cert: await readFile(values.cert), key: await readFile(values.key), ca: await readFile(values.ca) };
    } else {
      if (!values['state-dir'])
        throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'an agent that joins needs --state-dir (its key and certificate are kept there)');
      stored = await identityFor(
        endpoint,
        { name: values.name, stateDir: values['state-dir'], token: values.token, caPin: values['ca-pin'] },
        io,
      );
      identity = stored;
    }
    const reportedVersion = (hooks.env ?? process.env)[TEST_VERSION_ENV]?.trim();
    agent = startAgent({
      proxy: values['tunnel-addr'] ?? values.proxy,
      name: values.name,
      ...identity,
      resources: values.allow ?? [],
      services,
      ...(values['update-group'] ? { updateGroup: values['update-group'] } : {}),
      ...(reportedVersion ? { version: reportedVersion } : {}),
      ...(serverName ? { serverName } : {}),
      ...(hooks.env ? { env: hooks.env } : {}),
      dialTimeoutMs: timeoutMs,
      connectionCount,
      logger,
    });
    // The updater beside it (gate-upgrade) reads its readiness from the state directory.
    if (values['state-dir']) stopReporting = reportToUpdater(agent, values['state-dir'], logger);
    if (stored && values['state-dir']) {
      stopRenewal = keepRenewed(agent, endpoint, values['state-dir'], stored, io, logger, hooks.renewAt ?? renewalTime, (error) => {
        expired = error;
        onExpired();
      });
    }
  } catch (err) {
    io.err(failure(err));
    return 1;
  }
  const onProxy = (proxyId: string | undefined): string => (proxyId ? ` (proxy ${proxyId})` : '');
  agent.on('connected', (e: AgentConnectedEvent) =>
    io.out(`tunnel up: agent ${agent.name} via ${e.via} (connection ${e.connections})${onProxy(e.proxyId)}`),
  );
  agent.on('disconnected', (e: { reason: string; proxyId?: string }) => io.out(`tunnel down: ${e.reason}${onProxy(e.proxyId)}`));
  agent.on('refused', (e: GateError) => {
    // With tunnels up, a duplicate refusal is a dial the balancer sent to a proxy this agent
    // already holds (each proxy takes one tunnel per name): retried, not a failure to report.
    if (e.code === ErrorCodes.AGENT_DUPLICATE && agent.connected) return;
    io.err(failure(e));
  });
  const reload = untilReload(values.config, io);
  const why = await Promise.race([hooks.stopSignal ?? untilSignal(), expiry, reload.requested]);
  reload.cancel();
  stopRenewal();
  await agent.close({ graceMs: STOP_GRACE_MS });
  await stopReporting();
  io.out('tunnel closed');
  // A reload is a restart inside the process: the same command line, the file read again, the
  // identity from the state directory (no new join), open streams given the same grace as a stop.
  if (why === RELOAD && !expired) return main(argv, hooks);
  if (expired) {
    io.err(failure(expired));
    return 1;
  }
  return 0;
}

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import type { GateConfig } from '../config/types.js';
import { AgentAuthority } from '../tunnel/agent-authority.js';
import { DEV_TOKEN_FILE, loadDevToken } from '../tunnel/dev-token.js';
import type { JoinTokens } from '../tunnel/join-tokens.js';
import type { JoinTokenRule } from '../vocabulary/join-token-rule.js';
import { VersionChannels, type FetchText } from '../web/version-channels.js';
import { loadProxyCertificates, type ProxyCertificates } from './certificates.js';
import { webTlsFor, type WebTls } from './web-front-door.js';

/**
 * Everything a configuration makes that the running proxy reads: built whole by `loadProxyState`
 * (files, certificates, TLS contexts: whatever can fail) and swapped in with one assignment, so a
 * reload is all or nothing and no part ever sees half of one configuration and half of another.
 */
export interface ProxyState {
  readonly config: GateConfig;
  readonly certificates: ProxyCertificates;
  readonly webTls: WebTls;
  readonly channels: VersionChannels;
  /** Serials of agent certificates `auth_service.revoked_agent_certificates` names. */
  readonly revoked: ReadonlySet<string>;
  /** Static join tokens and the development token: what `JoinTokens.replace` is given at the swap. */
  readonly joinTokenRules: readonly JoinTokenRule[];
  /** The file holding the development join token (mode 0600 in data_dir); undefined when it is off. */
  readonly devTokenFile: string | undefined;
  /** `diag_token_file`'s token: what `/metrics` and `/v1/inventory` ask for. */
  readonly diagToken: string | undefined;
  /** Joins and renewals, signed by this state's cluster CA. */
  readonly authority: AgentAuthority;
}

export interface ProxyStateOptions {
  version: string;
  fetchText: FetchText;
  /** Long-lived: counts of token uses survive reloads. */
  joinTokens: JoinTokens;
  logger?: Logger | undefined;
}

export async function loadProxyState(config: GateConfig, options: ProxyStateOptions): Promise<ProxyState> {
  const logger = options.logger ? { logger: options.logger } : {};
  const dataDir = config.dataDir ?? '.data';
  const certificates = await loadProxyCertificates(config, dataDir);
  const devToken = config.agents.developmentToken ? await loadDevToken(dataDir) : undefined;
  const revoked = new Set(config.agents.revokedSerials);
  const diagToken = config.diagTokenFile === undefined ? undefined : await readDiagToken(config.diagTokenFile);
  return {
    config,
    certificates,
    webTls: webTlsFor(certificates),
    channels: new VersionChannels({
      channels: config.proxy.automaticUpgradesChannels,
      proxyVersion: options.version,
      fetchText: options.fetchText,
      ...logger,
    }),
    revoked,
    joinTokenRules: devToken ? [...config.agents.joinTokens, devToken] : [...config.agents.joinTokens],
    devTokenFile: devToken ? join(dataDir, DEV_TOKEN_FILE) : undefined,
    diagToken,
    authority: new AgentAuthority({
      ca: certificates.clusterCa,
      tokens: options.joinTokens,
      certificateTtlMs: () => config.agents.certificateTtlMs,
      isRevoked: (serial) => revoked.has(serial),
      ...logger,
    }),
  };
}

/** The shortest diagnostics token accepted: as a static join token. */
const MIN_DIAG_TOKEN_LENGTH = 16;

/** `diag_token_file`: its content, trimmed; refused when unreadable or shorter than 16 characters. */
async function readDiagToken(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new GateError(ErrorCodes.CONFIG_INVALID, `diag_token_file: cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  const token = text.trim();
  if (token.length < MIN_DIAG_TOKEN_LENGTH || /\s/.test(token)) {
    throw new GateError(
      ErrorCodes.CONFIG_INVALID,
      `diag_token_file: ${file} must hold one token of at least ${MIN_DIAG_TOKEN_LENGTH} characters, without spaces`,
    );
  }
  return token;
}

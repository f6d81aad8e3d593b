import { DEFAULT_AGENT_CERTIFICATE_TTL_MS } from './gate-schema.js';
import { isValidAgentName } from '../vocabulary/agent-name.js';
import { DEFAULT_JOIN_LIMITS, type RateLimit } from '../vocabulary/join-limits.js';
import { type AgentAuthConfig, type JoinTokenConfig, type ListenerMode } from './types.js';
import { Checker, describe, isPlainMap, MIN_DEADLINE_MS, type PathSegment } from './checker.js';
import { JOIN_TOKEN_KEYS, RATE_LIMIT_KEYS } from './gate-keys.js';

// gate.yaml's `auth_service` section: the listener mode, the agents' certificates and join tokens,
// and the join endpoints' rate limits.

const MIN_AGENT_CERTIFICATE_TTL_MS = 60 * 1000;

export function readListenerMode(c: Checker, auth: Record<string, unknown>): ListenerMode {
  const value = auth.proxy_listener_mode;
  if (value === undefined) return 'multiplex';
  if (value === 'multiplex' || value === 'separate') return value;
  c.fail(['auth_service', 'proxy_listener_mode'], `expected "multiplex" or "separate", got ${describe(value)}`);
  return 'multiplex';
}

export function readJoinToken(c: Checker, item: unknown, path: PathSegment[]): JoinTokenConfig | undefined {
  if (!isPlainMap(item))
    return c.fail(path, `expected a mapping with token (and optionally agents, expires, max_uses), got ${describe(item)}`);
  c.keys(item, JOIN_TOKEN_KEYS, path);
  // Never echo the token itself in a message: configuration errors are printed and logged.
  const token = typeof item.token === 'string' ? item.token.trim() : undefined;
  if (token === undefined) return c.fail([...path, 'token'], 'expected a secret string');
  if (token.length < 16)
    return c.fail([...path, 'token'], `expected at least 16 characters (got ${token.length}): a join token is a secret`);
  const agents: string[] = [];
  if (item.agents !== undefined) {
    const list = typeof item.agents === 'string' ? [item.agents] : item.agents;
    if (!Array.isArray(list)) return c.fail([...path, 'agents'], `expected a list of agent names, got ${describe(item.agents)}`);
    list.forEach((name, index) => {
      if (typeof name === 'string' && isValidAgentName(name)) agents.push(name);
      else c.fail([...path, 'agents', index], `expected an agent name (letters, digits, . _ -), got ${describe(name)}`);
    });
  }
  let expiresAt: number | undefined;
  if (item.expires !== undefined) {
    // YAML reads an unquoted timestamp as a Date; a quoted one is a string.
    const ms =
      item.expires instanceof Date ? item.expires.getTime() : typeof item.expires === 'string' ? Date.parse(item.expires) : Number.NaN;
    if (Number.isNaN(ms))
      return c.fail([...path, 'expires'], `expected an RFC 3339 time such as 2026-12-31T00:00:00Z, got ${describe(item.expires)}`);
    expiresAt = ms;
  }
  let maxUses: number | undefined;
  if (item.max_uses !== undefined) {
    if (typeof item.max_uses !== 'number' || !Number.isSafeInteger(item.max_uses) || item.max_uses < 1) {
      return c.fail([...path, 'max_uses'], `expected a whole number >= 1, got ${describe(item.max_uses)}`);
    }
    maxUses = item.max_uses;
  }
  return { token, agents, expiresAt, maxUses };
}

export function readAgentAuth(c: Checker, auth: Record<string, unknown>): AgentAuthConfig {
  const path: PathSegment[] = ['auth_service'];
  const joinTokens: JoinTokenConfig[] = [];
  if (auth.join_tokens !== undefined) {
    if (!Array.isArray(auth.join_tokens)) {
      c.fail([...path, 'join_tokens'], `expected a list of {token, agents, expires, max_uses}, got ${describe(auth.join_tokens)}`);
    } else {
      const seen = new Set<string>();
      auth.join_tokens.forEach((item, index) => {
        const token = readJoinToken(c, item, [...path, 'join_tokens', index]);
        if (!token) return;
        if (seen.has(token.token)) c.fail([...path, 'join_tokens', index, 'token'], 'the same token is listed twice');
        seen.add(token.token);
        joinTokens.push(token);
      });
    }
  }
  const certificateTtlMs = c.duration(auth.agent_certificate_ttl, [...path, 'agent_certificate_ttl'], DEFAULT_AGENT_CERTIFICATE_TTL_MS, {
    min: MIN_AGENT_CERTIFICATE_TTL_MS,
  });
  const revokedSerials: string[] = [];
  if (auth.revoked_agent_certificates !== undefined) {
    const list = auth.revoked_agent_certificates;
    if (!Array.isArray(list)) {
      c.fail([...path, 'revoked_agent_certificates'], `expected a list of certificate serial numbers (hex), got ${describe(list)}`);
    } else {
      list.forEach((serial, index) => {
        // Accept the colon-separated form `openssl x509 -serial` and browsers print.
        const hex = typeof serial === 'string' ? serial.replace(/:/g, '').trim().toLowerCase() : '';
        if (/^[0-9a-f]{1,64}$/.test(hex)) revokedSerials.push(hex.replace(/^0+(?=.)/, ''));
        else c.fail([...path, 'revoked_agent_certificates', index], `expected a serial number in hex, got ${describe(serial)}`);
      });
    }
  }
  const bodyTimeoutMs = c.duration(auth.join_body_timeout, [...path, 'join_body_timeout'], DEFAULT_JOIN_LIMITS.bodyTimeoutMs, {
    min: MIN_DEADLINE_MS,
    max: 60_000,
  });
  const limits = {
    join: readRateLimit(c, auth.join_rate_limit, [...path, 'join_rate_limit'], DEFAULT_JOIN_LIMITS.join),
    renew: readRateLimit(c, auth.renew_rate_limit, [...path, 'renew_rate_limit'], DEFAULT_JOIN_LIMITS.renew),
    bodyTimeoutMs,
  };
  // The development token exists so a laptop's first agent can join: once the operator has
  // written tokens of their own it is off unless asked for (issue 37).
  let developmentToken = joinTokens.length === 0;
  if (auth.development_token !== undefined) {
    if (typeof auth.development_token === 'boolean') developmentToken = auth.development_token;
    else c.fail([...path, 'development_token'], `expected true or false, got ${describe(auth.development_token)}`);
  }
  return { joinTokens, developmentToken, certificateTtlMs, revokedSerials, limits };
}

/** `{burst, per_minute}`: whole numbers, burst at least 1; either may be left out for its default. */
export function readRateLimit(c: Checker, value: unknown, path: PathSegment[], fallback: RateLimit): RateLimit {
  if (value === undefined) return fallback;
  if (!isPlainMap(value)) {
    c.fail(path, `expected a mapping {burst, per_minute}, got ${describe(value)}`);
    return fallback;
  }
  c.keys(value, RATE_LIMIT_KEYS, path);
  const count = (raw: unknown, key: string, min: number, fallbackValue: number): number => {
    if (raw === undefined) return fallbackValue;
    if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= min) return raw;
    c.fail([...path, key], `expected a whole number >= ${min}, got ${describe(raw)}`);
    return fallbackValue;
  };
  return { burst: count(value.burst, 'burst', 1, fallback.burst), perMinute: count(value.per_minute, 'per_minute', 0, fallback.perMinute) };
}

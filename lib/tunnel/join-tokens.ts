import { createHash, timingSafeEqual } from 'node:crypto';
import { ErrorCodes, GateError } from '../errors.js';
import type { JoinTokenRule } from '../vocabulary/join-token-rule.js';

/** Compared as SHA-256 digests so the comparison takes the same time whatever the length or content. */
function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

interface Entry {
  config: JoinTokenRule;
  digest: Buffer;
  /** Which token this is in messages and logs: its position, never its value. */
  label: string;
}

/**
 * The join tokens the proxy accepts: the configuration's static ones and the development token from
 * `data_dir`. `redeem` checks one for an agent name and counts the use; uses survive `replace` (a
 * configuration reload) for tokens still listed, and are kept in memory only, so a restart resets
 * them. Token values are never put in errors or logs.
 */
export class JoinTokens {
  private entries: Entry[] = [];
  private readonly uses = new Map<string, number>();

  constructor(tokens: JoinTokenRule[] = []) {
    this.replace(tokens);
  }

  /** The tokens from a new configuration. */
  replace(tokens: JoinTokenRule[]): void {
    this.entries = tokens.map((config, index) => ({ config, digest: digest(config.token), label: `join_tokens[${index}]` }));
  }

  /**
   * Checks `token` for agent `name` at `now` without counting a use: what a join does first,
   * before it reads anything else. Errors: GATE_ERR_JOIN_TOKEN_INVALID (unknown),
   * GATE_ERR_JOIN_TOKEN_EXPIRED, GATE_ERR_JOIN_TOKEN_EXHAUSTED (use limit reached),
   * GATE_ERR_JOIN_NAME_NOT_ALLOWED (the token lists other agent names). Returns the token's label
   * and `redeem`, which counts the use (checking the limit again) once the join has succeeded.
   */
  check(token: string, name: string, now = Date.now()): { label: string; redeem: () => void } {
    const offered = digest(token);
    // Every entry is compared, so the time taken does not tell which one matched.
    let found: Entry | undefined;
    for (const entry of this.entries) if (timingSafeEqual(entry.digest, offered) && !found) found = entry;
    if (!found) throw new GateError(ErrorCodes.JOIN_TOKEN_INVALID, 'unknown join token');
    const { config, label } = found;
    if (config.expiresAt !== undefined && now >= config.expiresAt) {
      throw new GateError(ErrorCodes.JOIN_TOKEN_EXPIRED, `join token ${label} expired at ${new Date(config.expiresAt).toISOString()}`);
    }
    if (config.agents.length > 0 && !config.agents.includes(name)) {
      throw new GateError(ErrorCodes.JOIN_NAME_NOT_ALLOWED, `join token ${label} does not allow the agent name ${JSON.stringify(name)}`);
    }
    const key = found.digest.toString('hex');
    const exhausted = (): GateError | undefined => {
      const used = this.uses.get(key) ?? 0;
      if (config.maxUses === undefined || used < config.maxUses) return undefined;
      return new GateError(ErrorCodes.JOIN_TOKEN_EXHAUSTED, `join token ${label} has been used ${used} of ${config.maxUses} times`);
    };
    const refused = exhausted();
    if (refused) throw refused;
    return {
      label,
      redeem: () => {
        const late = exhausted();
        if (late) throw late;
        this.uses.set(key, (this.uses.get(key) ?? 0) + 1);
      },
    };
  }

  /** `check`, then count the use at once. Returns the token's label. */
  redeem(token: string, name: string, now = Date.now()): string {
    const checked = this.check(token, name, now);
    checked.redeem();
    return checked.label;
  }
}

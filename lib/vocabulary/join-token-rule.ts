/** A join token the proxy accepts (`auth_service.join_tokens`, or the development token). */
export interface JoinTokenRule {
  /** The secret an agent presents once to get its first certificate. Never logged. */
  token: string;
  /** Agent names this token may join as; empty means any name. */
  agents: string[];
  /** Epoch milliseconds after which the token is refused; undefined: no expiry. */
  expiresAt: number | undefined;
  /** Joins allowed with this token (counted while the proxy runs); undefined: unlimited. */
  maxUses: number | undefined;
}

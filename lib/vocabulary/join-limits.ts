/** How many requests one source may make: a burst, refilled at a steady rate. */
export interface RateLimit {
  /** Requests a source may make at once (the bucket's size). */
  burst: number;
  /** Requests per minute the bucket refills with. */
  perMinute: number;
}

/** What bounds the join and renewal endpoints (`auth_service`; read per request, so reloads apply). */
export interface JoinLimits {
  /** Per source address (after a trusted PROXY header). */
  join: RateLimit;
  renew: RateLimit;
  /** How long a body may take to arrive after its headers. */
  bodyTimeoutMs: number;
}

/**
 * Defaults that a real fleet never meets: 500 agents behind one NAT joining or renewing at once
 * (a fleet provisioned together, or every agent renewing after a long outage) fit in the burst,
 * and a steady 10 a second per source refills it; an attacker from one address gets the same
 * 10 a second, each refused in microseconds if its token is wrong. A join body is one write of a
 * few KiB; 1.5 s covers a slow link and answers a dribbling client well within 2 s.
 */
export const DEFAULT_JOIN_LIMITS: JoinLimits = {
  join: { burst: 1000, perMinute: 600 },
  renew: { burst: 1000, perMinute: 600 },
  bodyTimeoutMs: 1500,
};

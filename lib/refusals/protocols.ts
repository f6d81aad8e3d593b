import { ALPN_MONGODB, ALPN_MYSQL, ALPN_POSTGRES, ALPN_POSTGRES_DIRECT, ALPN_REDIS, ALPN_SSH, PING_SUFFIX } from '../wire/names.js';
import { httpRefusal } from './http.js';
import { mysqlRefusal } from './mysql.js';
import { postgresRefusal } from './postgres.js';
import { redisRefusal } from './redis.js';
import { sshRefusal } from './ssh.js';
import type { RefusalStep } from './step.js';

/** The protocols a failed route can be answered in. */
// The union is spelled out rather than derived with `typeof`, so the public type does not name
// this list (internal only, issue 39); `satisfies` and the statement below keep the two the same.
export type RefusalProtocol = 'postgres' | 'mysql' | 'redis' | 'mongodb' | 'ssh' | 'http';
export const REFUSAL_PROTOCOLS = ['postgres', 'mysql', 'redis', 'mongodb', 'ssh', 'http'] as const satisfies readonly RefusalProtocol[];
true satisfies [RefusalProtocol] extends [(typeof REFUSAL_PROTOCOLS)[number]] ? true : never;

const STEPS: Record<Exclude<RefusalProtocol, 'mongodb'>, RefusalStep> = {
  postgres: postgresRefusal,
  mysql: mysqlRefusal,
  redis: redisRefusal,
  ssh: sshRefusal,
  http: httpRefusal,
};

let mongodb: Promise<RefusalStep> | undefined;

/**
 * The protocol's answer. MongoDB's is loaded when first needed: it brings a BSON library, which
 * a process whose MongoDB routes never fail (or that has none) should not load at start.
 */
export function refusalStep(protocol: RefusalProtocol): RefusalStep | Promise<RefusalStep> {
  if (protocol !== 'mongodb') return STEPS[protocol];
  mongodb ??= import('./mongodb.js').then((m) => m.mongodbRefusal);
  return mongodb;
}

/** The proxy's route protocols that have an answer; `web` is HTTP; Kubernetes (passthrough) has none. */
export function refusalForRoute(protocol: string): RefusalProtocol | undefined {
  if (protocol === 'web') return 'http';
  return (REFUSAL_PROTOCOLS as readonly string[]).includes(protocol) ? (protocol as RefusalProtocol) : undefined;
}

/** What a connection shows of its protocol, for a route that did not name one. */
export interface SeenProtocol {
  /** The detected protocol (`ssh`, `http1`, `postgres`, `tls`, ...). */
  protocol: string;
  /** The ALPN the proxy negotiated when it ended TLS. */
  negotiatedAlpn: string | undefined;
}

/**
 * The protocol a connection speaks as far as the proxy can tell: the ALPN it negotiated when it
 * ended TLS, else the plaintext greeting it detected. HTTP/2 is not answered (its errors need a
 * session); a connection whose TLS the proxy did not end is never answered (the caller checks).
 */
export function refusalForConnection(seen: SeenProtocol): RefusalProtocol | undefined {
  const alpn = seen.negotiatedAlpn;
  if (alpn !== undefined) {
    const base = alpn.endsWith(PING_SUFFIX) ? alpn.slice(0, -PING_SUFFIX.length) : alpn;
    if (base === ALPN_POSTGRES || base === ALPN_POSTGRES_DIRECT) return 'postgres';
    if (base === ALPN_MYSQL || base.startsWith(`${ALPN_MYSQL}-`)) return 'mysql';
    if (base === ALPN_REDIS) return 'redis';
    if (base === ALPN_MONGODB) return 'mongodb';
    if (base === ALPN_SSH) return 'ssh';
    if (base === 'http/1.1') return 'http';
    return undefined;
  }
  switch (seen.protocol) {
    case 'ssh':
      return 'ssh';
    case 'http1':
      return 'http';
    case 'postgres':
      return 'postgres';
    default:
      return undefined;
  }
}

/**
 * Who is asking the admin endpoint, from the TLS client certificate alone: a certificate of the
 * cluster CA carrying an admin URI subjectAltName (lib/wire/names.ts). Agents' and proxies'
 * certificates come from the same CA but never carry one (the CA sets every extension itself), and
 * an admin certificate's common name (`user:<name>`, `admin:local`) is no valid agent name, so it
 * cannot hold a tunnel either. Pure.
 */
import { ErrorCodes, GateError } from '../errors.js';
import { ADMIN_LOCAL_URI, ADMIN_USER_URI_PREFIX } from '../wire/names.js';
import { isValidResourceName } from './resource-kinds.js';

/** The identity a request carries. */
export type AdminIdentity =
  /** Full permissions: made on a proxy's host from the CA key in data_dir. */
  | { kind: 'local'; name: string }
  /** A user `users add` issued: its roles are read from the store at each request. */
  | { kind: 'user'; name: string; identityId: string };

/** What the endpoint reads off the TLS socket. */
export interface AdminTlsFacts {
  /** False over plaintext HTTP. */
  tls: boolean;
  /** True when the client certificate verified against the cluster CA. */
  authorized: boolean;
  authorizationError: string | undefined;
  /** `subjectaltname` as Node prints it, or undefined when no certificate came. */
  subjectAltName: string | undefined;
}

/** The name the local full-permission identity is logged under. */
export const LOCAL_ADMIN_NAME = 'admin (local)';

/** The common name of a user's certificate: no valid agent name (a colon), so never an agent's. */
export function userCommonName(user: string): string {
  return `user:${user}`;
}

export const LOCAL_ADMIN_COMMON_NAME = 'admin:local';

/** The URI subjectAltName a user's certificate carries. */
export function userUri(user: string, identityId: string): string {
  return `${ADMIN_USER_URI_PREFIX}${user}:${identityId}`;
}

const IDENTITY_ID = /^[0-9a-f]{16,64}$/;

/**
 * The identity of a request, or GATE_ERR_ADMIN_UNAUTHENTICATED saying what was missing. Nothing
 * but these facts is looked at: an anonymous request costs no more than this.
 */
export function adminIdentityOf(facts: AdminTlsFacts): AdminIdentity {
  const refuse = (why: string): never => {
    throw new GateError(ErrorCodes.ADMIN_UNAUTHENTICATED, `the admin endpoint needs an admin identity: ${why}`);
  };
  if (!facts.tls) return refuse('plaintext HTTP (use https)');
  if (facts.subjectAltName === undefined) return refuse('no client certificate (gate-mux users add issues an identity file)');
  if (!facts.authorized) return refuse(`the certificate is not from this cluster's CA (${facts.authorizationError ?? 'not verified'})`);
  const uris = facts.subjectAltName
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.startsWith('URI:'))
    .map((entry) => entry.slice(4));
  if (uris.includes(ADMIN_LOCAL_URI)) return { kind: 'local', name: LOCAL_ADMIN_NAME };
  for (const uri of uris) {
    if (!uri.startsWith(ADMIN_USER_URI_PREFIX)) continue;
    const rest = uri.slice(ADMIN_USER_URI_PREFIX.length);
    const colon = rest.lastIndexOf(':');
    const name = rest.slice(0, colon);
    const identityId = rest.slice(colon + 1);
    if (colon > 0 && isValidResourceName(name) && IDENTITY_ID.test(identityId)) return { kind: 'user', name, identityId };
  }
  return refuse("the certificate is the cluster CA's but names no admin identity (an agent's or a proxy's)");
}

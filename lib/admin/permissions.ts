/**
 * What an admin identity may do, read from the store at each request: a user's roles are the
 * `spec.roles` of its `user` resource, each role's rules `spec.allow.rules`. So a role change, a
 * `users update --set-roles` or a `users rm` takes effect at the next request, not at a re-login.
 */
import { ErrorCodes, GateError } from '../errors.js';
import type { ResourceStore } from '../cluster/resource-store.js';
import type { AdminIdentity } from './admin-identity.js';
import { rulesOf, type RoleRule } from './manifest.js';
import { ROLE_KIND, USER_KIND, type Verb } from './resource-kinds.js';

export interface Permissions {
  readonly who: string;
  readonly roles: readonly string[] | 'all';
  /** Throws GATE_ERR_ACCESS_DENIED naming the user, the verb and the resource unless a rule allows it. */
  check(verb: Verb, kind: string, name?: string): void;
}

/** Whether `rules` allow `verb` on `kind` (`*` in either list matches all; `read` also lists). Pure. */
export function rulesAllow(rules: readonly RoleRule[], verb: Verb, kind: string): boolean {
  return rules.some(
    (r) =>
      (r.resources.includes(kind) || r.resources.includes('*')) &&
      (r.verbs.includes(verb) || r.verbs.includes('*') || (verb === 'list' && r.verbs.includes('read'))),
  );
}

/** The user resource's roles and identity id, as stored. */
export function userRecordOf(document: Record<string, unknown>): { roles: string[]; identityId: string | undefined } {
  const spec = document.spec as { roles?: unknown; identity?: unknown } | undefined;
  const roles = Array.isArray(spec?.roles) ? spec.roles.filter((r): r is string => typeof r === 'string') : [];
  return { roles, identityId: typeof spec?.identity === 'string' ? spec.identity : undefined };
}

/**
 * The permissions of `identity`: all for the local identity; for a user, its roles' rules. A user
 * the store no longer holds, or holds with another identity id (removed and added again), is
 * GATE_ERR_ADMIN_UNAUTHENTICATED: that identity file is revoked.
 */
export async function permissionsOf(identity: AdminIdentity, store: ResourceStore): Promise<Permissions> {
  if (identity.kind === 'local') return { who: identity.name, roles: 'all', check: () => {} };
  const user = await store.getResource(USER_KIND, identity.name);
  const record = user && userRecordOf(user.document);
  if (!record || record.identityId !== identity.identityId)
    throw new GateError(ErrorCodes.ADMIN_UNAUTHENTICATED, `user ${identity.name}: this identity has been revoked (gate-mux users rm)`);
  const rules: RoleRule[] = [];
  for (const role of record.roles) {
    const found = await store.getResource(ROLE_KIND, role);
    if (found) rules.push(...rulesOf(found.document));
  }
  return {
    who: identity.name,
    roles: record.roles,
    check: (verb, kind, name) => {
      if (rulesAllow(rules, verb, kind)) return;
      throw new GateError(
        ErrorCodes.ACCESS_DENIED,
        `user ${identity.name} may not ${verb} ${name === undefined ? kind : `${kind}/${name}`}: no rule of its roles (${record.roles.join(', ') || 'none'}) allows it`,
      );
    },
  };
}

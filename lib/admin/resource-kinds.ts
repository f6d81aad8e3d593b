/**
 * The resource kinds the admin command manages and the verbs a role's rules grant on them: the
 * names the platform's role manifest uses (`cluster_maintenance_config`; `create`, `read`,
 * `update`, `delete`), plus `list` (a `get` of a kind without a name) and `*` in either list.
 */

export const MAINTENANCE_KIND = 'cluster_maintenance_config';
/** The one `cluster_maintenance_config` of a cluster is named so (its manifest needs no name). */
export const MAINTENANCE_NAME = 'cluster-maintenance-config';
export const ROLE_KIND = 'role';
/** The role manifest's version, as the platform writes it. */
export const ROLE_VERSION = 'v7';
export const USER_KIND = 'user';
/** Not stored: `inventory ls` is a `read` of it. */
export const INVENTORY_KIND = 'inventory';

/** Kinds a role's rule may name. */
export const RESOURCE_KINDS = [MAINTENANCE_KIND, ROLE_KIND, USER_KIND, INVENTORY_KIND] as const;
/** Kinds stored in the cluster store (what `get` and `rm` take). */
export const STORED_KINDS = [MAINTENANCE_KIND, ROLE_KIND, USER_KIND] as const;

export const VERBS = ['create', 'read', 'list', 'update', 'delete'] as const;
export type Verb = (typeof VERBS)[number];

/** Names of roles and users: letters, digits, `.`, `_`, `-`, `@` (an e-mail address as a user name); at most 128. */
const NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._@-]{0,126}[A-Za-z0-9])?$/;

export function isValidResourceName(name: string): boolean {
  return NAME.test(name);
}

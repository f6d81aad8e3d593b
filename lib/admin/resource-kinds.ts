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

/** Managed rollouts (the platform's names): how, what, and where the rollout stands. One of each per cluster. */
export const AUTOUPDATE_CONFIG_KIND = 'autoupdate_config';
export const AUTOUPDATE_CONFIG_NAME = 'autoupdate-config';
export const AUTOUPDATE_VERSION_KIND = 'autoupdate_version';
export const AUTOUPDATE_VERSION_NAME = 'autoupdate-version';
/**
 * Written by the rollout controller, not by `create`: each group's state and why. `autoupdate agents
 * status` is a `read` of it; `start-update`, `mark-done` and `rollback` an `update`.
 */
export const AUTOUPDATE_ROLLOUT_KIND = 'autoupdate_agent_rollout';
export const AUTOUPDATE_ROLLOUT_NAME = 'autoupdate-agent-rollout';

/** Kinds a role's rule may name. */
export const RESOURCE_KINDS = [
  MAINTENANCE_KIND,
  ROLE_KIND,
  USER_KIND,
  INVENTORY_KIND,
  AUTOUPDATE_CONFIG_KIND,
  AUTOUPDATE_VERSION_KIND,
  AUTOUPDATE_ROLLOUT_KIND,
] as const;
/** Kinds stored in the cluster store (what `get` and `rm` take). */
export const STORED_KINDS = [
  MAINTENANCE_KIND,
  ROLE_KIND,
  USER_KIND,
  AUTOUPDATE_CONFIG_KIND,
  AUTOUPDATE_VERSION_KIND,
  AUTOUPDATE_ROLLOUT_KIND,
] as const;
/** Singletons: `get` and `rm` of them need no name. */
export const SINGLETON_NAMES: Readonly<Record<string, string>> = {
  [MAINTENANCE_KIND]: MAINTENANCE_NAME,
  [AUTOUPDATE_CONFIG_KIND]: AUTOUPDATE_CONFIG_NAME,
  [AUTOUPDATE_VERSION_KIND]: AUTOUPDATE_VERSION_NAME,
  [AUTOUPDATE_ROLLOUT_KIND]: AUTOUPDATE_ROLLOUT_NAME,
};

export const VERBS = ['create', 'read', 'list', 'update', 'delete'] as const;
export type Verb = (typeof VERBS)[number];

/** Names of roles and users: letters, digits, `.`, `_`, `-`, `@` (an e-mail address as a user name); at most 128. */
const NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._@-]{0,126}[A-Za-z0-9])?$/;

export function isValidResourceName(name: string): boolean {
  return NAME.test(name);
}

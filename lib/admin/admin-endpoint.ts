/**
 * The admin endpoint on the web port (`/v1/admin/<operation>`), which `gate-mux create`, `get`,
 * `rm`, `status`, `users` and `inventory ls` call over mutual TLS. Order of work for every request:
 * the client certificate (read off the TLS socket: no body, no store, no key work, so an anonymous
 * or foreign request costs what a bad join token costs), then the identity's permissions (the
 * store, for a user), then the body (bounded in size and time), then the operation. Every change
 * is logged with who made it, what, and the new revision.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError, isGateError, toGateError } from '../errors.js';
import { LogLimiter } from '../log-limiter.js';
import { componentLogger, type Logger } from '../log.js';
import type { CertificateAuthority } from '../pki/certificate-authority.js';
import { verifyRequestOffThread } from '../pki/certificate-request.js';
import { readInventory, type InventoryRow } from '../cluster/inventory.js';
import type { ResourceStore, StoredResource } from '../cluster/resource-store.js';
import type { RouteStore } from '../cluster/route-store.js';
import { formatMaintenanceConfig } from '../config/maintenance-schedule.js';
import { readBody } from '../tunnel/request-body.js';
import { verifyErrorCode } from '../tunnel/admission.js';
import { ADMIN_PATH_PREFIX } from '../wire/names.js';
import { adminIdentityOf, userCommonName, userUri, type AdminIdentity, type AdminTlsFacts } from './admin-identity.js';
import { maintenanceOf, readManifests } from './manifest.js';
import { permissionsOf, userRecordOf, type Permissions } from './permissions.js';
import { agentReport, rolloutStatus } from './rollout-status.js';
import { applyCommand, rolloutDocument, type RolloutCommand } from './rollout-state.js';
import { readRollout, rolloutInForce } from './rollout-watch.js';
import {
  AUTOUPDATE_ROLLOUT_KIND,
  AUTOUPDATE_ROLLOUT_NAME,
  INVENTORY_KIND,
  isValidResourceName,
  MAINTENANCE_KIND,
  ROLE_KIND,
  SINGLETON_NAMES,
  STORED_KINDS,
  USER_KIND,
} from './resource-kinds.js';
import { httpStatusForCode } from '../tunnel/http-error-status.js';

/** Manifests are a few KiB; a request of more is refused unread. */
export const MAX_ADMIN_BODY_BYTES = 256 * 1024;
const BODY_TIMEOUT_MS = 10_000;
/** A rollout command races the controller's writes at most this many times. */
const COMMAND_ATTEMPTS = 5;
const REFUSED_DRAIN_MS = 2000;
/** A user's identity lives this long unless `users add --ttl` says otherwise; at most MAX. */
export const DEFAULT_IDENTITY_TTL_MS = 12 * 3600_000;
export const MAX_IDENTITY_TTL_MS = 30 * 24 * 3600_000;
const MIN_IDENTITY_TTL_MS = 60_000;

export interface AdminStatus {
  cluster: string;
  version: string;
  ca_pin: string;
  proxy_id: string;
  proxies: number;
  agents: number;
}

export interface AdminEndpointOptions {
  /** The cluster store (from the proxy's join on; undefined before). */
  store: () => (RouteStore & ResourceStore) | undefined;
  /** The cluster CA: it signs users' identities. */
  ca: () => CertificateAuthority;
  /** What `status` says of this proxy and its cluster. */
  identity: () => { cluster: string; version: string; caPin: string; proxyId: string };
  logger?: Logger | undefined;
}

type Body = Record<string, unknown>;
type Operation = (who: Permissions, body: Body, identity: AdminIdentity) => Promise<unknown>;

/** An invalid manifest: the error with every issue. */
class InvalidManifest extends GateError {
  constructor(readonly issues: string[]) {
    super(ErrorCodes.RESOURCE_INVALID, `the manifest is not valid; nothing was changed:\n  ${issues.join('\n  ')}`);
  }
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

function tlsFacts(req: IncomingMessage): AdminTlsFacts {
  const socket = req.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function')
    return { tls: false, authorized: false, authorizationError: undefined, subjectAltName: undefined };
  const peer = socket.getPeerCertificate();
  const has = peer !== null && peer !== undefined && Object.keys(peer).length > 0;
  return {
    tls: true,
    authorized: socket.authorized === true,
    authorizationError: verifyErrorCode(socket.authorizationError),
    subjectAltName: has ? (peer.subjectaltname ?? '') : undefined,
  };
}

function stringField(body: Body, key: string): string {
  const value = body[key];
  if (typeof value !== 'string' || value === '') throw new GateError(ErrorCodes.INVALID_ARGUMENT, `${key}: required`);
  return value;
}

function rolesField(body: Body): string[] {
  const roles = body.roles;
  if (!Array.isArray(roles) || !roles.every((r) => typeof r === 'string' && isValidResourceName(r)))
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'roles: expected a list of role names');
  return [...new Set(roles as string[])];
}

/** A stored resource as `get` shows it: the manifest, with its revision under metadata. */
export function shownResource(resource: StoredResource): Record<string, unknown> {
  const metadata = { ...(resource.document.metadata as Record<string, unknown> | undefined), name: resource.name };
  return { ...resource.document, metadata: { ...metadata, revision: resource.revision } };
}

/** `02:00-03:00 UTC on Monday, Wednesday`. Pure. */
export function describeWindow(document: Record<string, unknown>): string {
  const config = maintenanceOf(document);
  if (!config) return 'not readable';
  const text = formatMaintenanceConfig(config);
  const days = /weekdays: \[(.*)\]/.exec(text)?.[1] ?? '';
  const pad = (h: number): string => String(h).padStart(2, '0');
  return `${pad(config.utcStartHour)}:00-${pad((config.utcStartHour + 1) % 24)}:00 UTC on ${days}`;
}

/**
 * The handler the web front door asks; returns false for paths outside `/v1/admin/`. Answers are
 * JSON; a refusal is `{"error":{"code":"GATE_ERR_...","message":...}}` (with `issues` for an
 * invalid manifest) and is logged with its code.
 */
export function createAdminRoutes(options: AdminEndpointOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const log = componentLogger(options.logger, 'admin');
  const refusals = new LogLimiter(log);

  const store = (): RouteStore & ResourceStore => {
    const s = options.store();
    if (!s) throw new GateError(ErrorCodes.STORE_UNAVAILABLE, 'the proxy has not joined its cluster store yet');
    return s;
  };

  const changed = (who: Permissions, verb: string, resource: { kind: string; name: string; revision: number }): void =>
    log.info(
      { user: who.who, verb, kind: resource.kind, name: resource.name, revision: resource.revision },
      `${who.who} ${verb} ${resource.kind}/${resource.name}: revision ${resource.revision}`,
    );

  const rolesMustExist = async (roles: string[]): Promise<void> => {
    for (const role of roles)
      if (!(await store().getResource(ROLE_KIND, role)))
        throw new GateError(ErrorCodes.RESOURCE_NOT_FOUND, `role ${role} does not exist (create it first: gate-mux create role.yaml)`);
  };

  const issueIdentity = async (user: string, identityId: string, body: Body): Promise<{ cert: string; ca: string; expires: string }> => {
    const ttlSeconds = body.ttl_seconds === undefined ? DEFAULT_IDENTITY_TTL_MS / 1000 : Number(body.ttl_seconds);
    const ttlMs = ttlSeconds * 1000;
    if (!Number.isFinite(ttlMs) || ttlMs < MIN_IDENTITY_TTL_MS || ttlMs > MAX_IDENTITY_TTL_MS)
      throw new GateError(ErrorCodes.INVALID_ARGUMENT, `ttl_seconds: from ${MIN_IDENTITY_TTL_MS / 1000} to ${MAX_IDENTITY_TTL_MS / 1000}`);
    const checked = await verifyRequestOffThread(stringField(body, 'csr'));
    const ca = options.ca();
    const issued = await ca.issueForOffThread(checked.spki, {
      commonName: userCommonName(user),
      uris: [userUri(user, identityId)],
      usage: 'client',
      ttlMs,
      backdateMs: Math.min(5 * 60_000, Math.floor(ttlMs / 4)),
    });
    return { cert: issued.cert, ca: ca.cert, expires: issued.notAfter.toISOString() };
  };

  const operations: Record<string, { method: 'GET' | 'POST'; run: Operation }> = {
    status: {
      method: 'GET',
      run: async () => {
        const s = store();
        const [proxies, agents] = await Promise.all([s.proxies(), readInventory(s)]);
        const me = options.identity();
        return {
          cluster: me.cluster,
          version: me.version,
          ca_pin: me.caPin,
          proxy_id: me.proxyId,
          proxies: proxies.length,
          agents: agents.length,
        } satisfies AdminStatus;
      },
    },
    inventory: {
      method: 'GET',
      run: async (who): Promise<InventoryRow[]> => {
        who.check('read', INVENTORY_KIND);
        return readInventory(store());
      },
    },
    get: {
      method: 'POST',
      run: async (who, body) => {
        const kind = stringField(body, 'kind');
        if (!(STORED_KINDS as readonly string[]).includes(kind))
          throw new GateError(ErrorCodes.INVALID_ARGUMENT, `kind ${kind}: expected one of ${STORED_KINDS.join(', ')}`);
        const name = body.name === undefined ? SINGLETON_NAMES[kind] : stringField(body, 'name');
        if (name === undefined) {
          who.check('list', kind);
          return { resources: (await store().listResources(kind)).map(shownResource) };
        }
        who.check('read', kind, name);
        const found = await store().getResource(kind, name);
        if (!found) throw new GateError(ErrorCodes.RESOURCE_NOT_FOUND, `${kind}/${name} not found`);
        return { resources: [shownResource(found)] };
      },
    },
    create: {
      method: 'POST',
      run: async (who, body) => {
        const manifest = body.manifest;
        if (typeof manifest !== 'string') throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'manifest: required');
        const force = body.force === true;
        const read = readManifests(manifest);
        if (read.issues.length > 0) throw new InvalidManifest(read.issues);
        const s = store();
        // Every document is allowed and possible before any is written.
        const plans = [];
        for (const m of read.manifests) {
          const exists = (await s.getResource(m.kind, m.name)) !== undefined;
          const verb = force && exists ? 'update' : 'create';
          who.check(verb, m.kind, m.name);
          if (exists && !force)
            throw new GateError(ErrorCodes.RESOURCE_EXISTS, `${m.kind}/${m.name} already exists: use -f to overwrite it`);
          plans.push({ manifest: m, verb });
        }
        const applied = [];
        for (const { manifest: m, verb } of plans) {
          const stored = await s.putResource(
            { kind: m.kind, name: m.name, document: m.document, updatedBy: who.who, updatedAt: Date.now() },
            force ? 'replace' : 'create',
          );
          if (!stored) throw new GateError(ErrorCodes.RESOURCE_EXISTS, `${m.kind}/${m.name} already exists: use -f to overwrite it`);
          changed(who, verb, stored);
          const message =
            m.kind === MAINTENANCE_KIND
              ? `maintenance window has been updated: ${describeWindow(stored.document)} (revision ${stored.revision})`
              : `${m.kind} "${m.name}" has been ${verb === 'create' ? 'created' : 'updated'} (revision ${stored.revision})`;
          applied.push({ kind: m.kind, name: m.name, revision: stored.revision, verb, message });
        }
        return { applied };
      },
    },
    rm: {
      method: 'POST',
      run: async (who, body) => {
        const kind = stringField(body, 'kind');
        if (!(STORED_KINDS as readonly string[]).includes(kind))
          throw new GateError(ErrorCodes.INVALID_ARGUMENT, `kind ${kind}: expected one of ${STORED_KINDS.join(', ')}`);
        const name = body.name === undefined && SINGLETON_NAMES[kind] !== undefined ? SINGLETON_NAMES[kind] : stringField(body, 'name');
        who.check('delete', kind, name);
        const removed = await store().deleteResource(kind, name);
        if (!removed) throw new GateError(ErrorCodes.RESOURCE_NOT_FOUND, `${kind}/${name} not found`);
        log.info({ user: who.who, verb: 'delete', kind, name, revision: removed.revision }, `${who.who} delete ${kind}/${name}`);
        return {
          removed: { kind, name },
          message: kind === USER_KIND ? `user "${name}" has been removed: its identity is revoked` : `${kind}/${name} has been removed`,
        };
      },
    },
    'users/add': {
      method: 'POST',
      run: async (who, body) => {
        const name = stringField(body, 'name');
        if (!isValidResourceName(name))
          throw new GateError(ErrorCodes.INVALID_ARGUMENT, `name ${JSON.stringify(name)}: letters, digits, ".", "_", "-", "@"`);
        const roles = rolesField(body);
        who.check('create', USER_KIND, name);
        await rolesMustExist(roles);
        const identityId = randomBytes(16).toString('hex');
        // The CSR is checked before the user is written: a bad one leaves nothing behind.
        const identity = await issueIdentity(name, identityId, body);
        const document = { kind: USER_KIND, version: 'v2', metadata: { name }, spec: { roles, identity: identityId } };
        const stored = await store().putResource({ kind: USER_KIND, name, document, updatedBy: who.who, updatedAt: Date.now() }, 'create');
        if (!stored)
          throw new GateError(
            ErrorCodes.RESOURCE_EXISTS,
            `user ${name} already exists: gate-mux users update changes its roles, users rm removes it`,
          );
        changed(who, 'create', stored);
        return { ...identity, user: name, roles, revision: stored.revision };
      },
    },
    'users/update': {
      method: 'POST',
      run: async (who, body) => {
        const name = stringField(body, 'name');
        const roles = rolesField(body);
        who.check('update', USER_KIND, name);
        const s = store();
        const found = await s.getResource(USER_KIND, name);
        if (!found) throw new GateError(ErrorCodes.RESOURCE_NOT_FOUND, `user ${name} not found (gate-mux users add makes one)`);
        await rolesMustExist(roles);
        const document = { ...found.document, spec: { roles, identity: userRecordOf(found.document).identityId } };
        const stored = await s.putResource({ kind: USER_KIND, name, document, updatedBy: who.who, updatedAt: Date.now() }, 'update');
        // Removed meanwhile (users rm): it stays removed, and its identity revoked.
        if (!stored) throw new GateError(ErrorCodes.RESOURCE_NOT_FOUND, `user ${name} not found (removed meanwhile)`);
        changed(who, 'update', stored);
        return { user: name, roles, revision: stored.revision };
      },
    },
    'autoupdate/status': {
      method: 'GET',
      run: async (who) => {
        who.check('read', AUTOUPDATE_ROLLOUT_KIND, AUTOUPDATE_ROLLOUT_NAME);
        const s = store();
        const [view, inventory] = await Promise.all([readRollout(s), readInventory(s)]);
        return rolloutStatus(rolloutInForce(view, Date.now()), inventory);
      },
    },
    'autoupdate/report': {
      method: 'GET',
      run: async (who) => {
        who.check('read', INVENTORY_KIND);
        const s = store();
        const [view, inventory] = await Promise.all([readRollout(s), readInventory(s)]);
        return { agents: agentReport(rolloutInForce(view, Date.now()), inventory) };
      },
    },
    'autoupdate/command': {
      method: 'POST',
      run: async (who, body) => {
        const verb = stringField(body, 'verb');
        const group = body.group === undefined ? undefined : stringField(body, 'group');
        let command: RolloutCommand;
        if (verb === 'rollback') command = { verb, group };
        else if ((verb === 'start-update' || verb === 'mark-done') && group !== undefined) command = { verb, group };
        else throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'verb: start-update GROUP, mark-done GROUP or rollback [GROUP]');
        who.check('update', AUTOUPDATE_ROLLOUT_KIND, AUTOUPDATE_ROLLOUT_NAME);
        const s = store();
        // The controller writes the same resource: written over the revision read, read again when it moved.
        for (let attempt = 0; attempt < COMMAND_ATTEMPTS; attempt++) {
          const view = await readRollout(s);
          const state = rolloutInForce(view, Date.now());
          if (!state)
            throw new GateError(
              ErrorCodes.ROLLOUT_COMMAND_REFUSED,
              'no rollout: create an autoupdate_config and an autoupdate_version first',
            );
          const next = applyCommand(state, command, who.who, Date.now());
          const stored = await s.putResource(
            {
              kind: AUTOUPDATE_ROLLOUT_KIND,
              name: AUTOUPDATE_ROLLOUT_NAME,
              document: rolloutDocument(next, AUTOUPDATE_ROLLOUT_NAME, AUTOUPDATE_ROLLOUT_KIND),
              updatedBy: who.who,
              updatedAt: Date.now(),
            },
            { revision: view.stateRevision },
          );
          if (!stored) continue;
          changed(who, verb, stored);
          const named = group === undefined ? 'every started group' : `group ${group}`;
          return { verb, group: group ?? null, revision: stored.revision, message: `${verb}: ${named} (revision ${stored.revision})` };
        }
        throw new GateError(ErrorCodes.STORE_UNAVAILABLE, 'the rollout state changed under every attempt: try again');
      },
    },
    // A user's own identity, renewed before it expires: only the certificate it presents is needed.
    'users/renew': {
      method: 'POST',
      run: async (_who, body, identity) => {
        if (identity.kind !== 'user') throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'only a user identity is renewed');
        return { ...(await issueIdentity(identity.name, identity.identityId, body)), user: identity.name };
      },
    },
  };

  function refuse(req: IncomingMessage, res: ServerResponse, error: GateError, where: Record<string, unknown>): void {
    const issues = error instanceof InvalidManifest ? { issues: error.issues } : {};
    refusals.log('warn', error.code, { ...where, code: error.code, ...issues }, `admin request refused: ${error.message.split('\n')[0]}`);
    if (res.headersSent || res.destroyed) return;
    sendJson(res, httpStatusForCode(error.code), {
      error: { code: error.code, message: error.message, ...(error instanceof InvalidManifest ? { issues: error.issues } : {}) },
    });
    // As the join endpoint: a request refused before its body was read gets a moment to be discarded, then goes.
    if (req.complete || req.httpVersionMajor !== 1) return;
    const socket = req.socket;
    const drained = setTimeout(() => socket.destroy(), REFUSED_DRAIN_MS).unref();
    socket.once('close', () => clearTimeout(drained));
  }

  return (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    if (!path.startsWith(ADMIN_PATH_PREFIX)) return false;
    const where = { remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`, path };
    let identity: AdminIdentity;
    try {
      identity = adminIdentityOf(tlsFacts(req));
    } catch (err) {
      refuse(req, res, toGateError(err, ErrorCodes.ADMIN_UNAUTHENTICATED), where);
      return true;
    }
    const operation = Object.hasOwn(operations, path.slice(ADMIN_PATH_PREFIX.length))
      ? operations[path.slice(ADMIN_PATH_PREFIX.length)]
      : undefined;
    if (!operation) {
      sendJson(res, 404, { error: { code: 'not_found', message: `no admin operation ${path}`, operations: Object.keys(operations) } });
      return true;
    }
    if (req.method !== operation.method) {
      res.setHeader('Allow', operation.method);
      sendJson(res, 405, { error: { code: 'method_not_allowed', message: `only ${operation.method}` } });
      return true;
    }
    Promise.resolve()
      .then(() => permissionsOf(identity, store()))
      .then(async (who) => {
        const body = operation.method === 'POST' ? await readJson(req) : {};
        return operation.run(who, body, identity);
      })
      .then(
        (answer) => sendJson(res, 200, answer),
        (err: unknown) =>
          refuse(req, res, isGateError(err) ? err : new GateError(ErrorCodes.HANDLER_FAILED, (err as Error).message, { cause: err }), {
            ...where,
            user: identity.name,
          }),
      );
    return true;
  };
}

async function readJson(req: IncomingMessage): Promise<Body> {
  const body = await readBody(req, { maxBytes: MAX_ADMIN_BODY_BYTES, timeoutMs: BODY_TIMEOUT_MS });
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `request body is not JSON: ${(err as Error).message}`, { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'request body is not a JSON object');
  return value as Body;
}

import { ErrorCodes, isGateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { parseChannelPath, pathOf } from './channel-path.js';
import type { PingResponse } from './ping.js';
import type { VersionChannels } from './version-channels.js';
import { formatMaintenanceConfig, type MaintenanceConfig } from '../config/maintenance-schedule.js';
import { CHANNEL_VERB_CRITICAL, CHANNEL_VERB_VERSION, FIND_PATH, MAINTENANCE_SCHEDULE_PATH, PING_PATH } from '../wire/names.js';
import { parseFindQuery, type FindAutoUpdate } from './find.js';

/** What the handler needs of a request: node:http's IncomingMessage and http2's compat request both fit. */
export interface WebRequest {
  method?: string | undefined;
  url?: string | undefined;
}

/** What the handler needs of a response: node:http's ServerResponse and http2's compat response both fit. */
export interface WebResponse {
  statusCode: number;
  setHeader(name: string, value: string | number | readonly string[]): unknown;
  end(chunk?: string): unknown;
}

/** Returns true when it handled (or will handle) the request; false leaves the caller to answer (404). */
export type WebRequestHandler = (req: WebRequest, res: WebResponse) => boolean;

export interface WebRoutesOptions {
  /** Called per request, so the answer can reflect listeners bound after start-up (port 0). */
  ping: () => PingResponse;
  channels: VersionChannels;
  /** The cluster's maintenance schedule, per request (it follows reloads); undefined: none configured. */
  maintenance?: () => MaintenanceConfig | undefined;
  /** The rollout's answer for a host of a group (from memory: no store round trip); unset: unmanaged. */
  find?: (host: string, group: string) => FindAutoUpdate;
  logger?: Logger;
}

/** Short, stable error codes in `{"error":{"code","message"}}` answers. */
export const WebErrorCodes = {
  INVALID_CHANNEL_NAME: 'invalid_channel_name',
  CHANNEL_NOT_FOUND: 'channel_not_found',
  UNKNOWN_ENDPOINT: 'unknown_endpoint',
  /** A path the proxy serves nothing at. */
  NOT_FOUND: 'not_found',
  SCHEDULE_NOT_CONFIGURED: 'schedule_not_configured',
  UPSTREAM_FAILED: 'upstream_failed',
  METHOD_NOT_ALLOWED: 'method_not_allowed',
  INTERNAL: 'internal_error',
} as const;

function send(req: WebRequest, res: WebResponse, status: number, contentType: string, body: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  // Clients poll these to decide what to run; a cache between them and the proxy must revalidate.
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  // RFC 9110 §9.3.2: HEAD gets the same header fields as GET, without content.
  res.end(req.method === 'HEAD' ? undefined : body);
}

function sendError(req: WebRequest, res: WebResponse, status: number, code: string, message: string): void {
  send(req, res, status, 'application/json', JSON.stringify({ error: { code, message } }));
}

/**
 * The proxy's own web endpoints: `GET /webapi/ping` (JSON),
 * `GET /v1/webapi/automaticupgrades/channel/<name>/version` and `.../<name>/critical` (text/plain),
 * and `GET /v1/webapi/automaticupgrades/schedule` (the maintenance schedule, YAML; 404 when none
 * is configured), `GET /v1/webapi/find?host=&group=` (the rollout's answer for one agent, JSON;
 * 400 with a GATE_ERR_* code for a query that is not one). Only GET and HEAD (405 otherwise); 400 for bad channel paths, 404 for unknown
 * channels, 502 when a forwarded channel's upstream fails.
 */
export function createWebRoutes(options: WebRoutesOptions): WebRequestHandler {
  const log = componentLogger(options.logger, 'web');
  return (req, res) => {
    const target = req.url ?? '/';
    const path = pathOf(target);
    const isPing = path === PING_PATH;
    const isSchedule = path === MAINTENANCE_SCHEDULE_PATH;
    const isFind = path === FIND_PATH;
    const channelPath = isPing || isSchedule || isFind ? undefined : parseChannelPath(target);
    if (!isPing && !isSchedule && !isFind && channelPath?.kind === 'other') return false;

    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      sendError(req, res, 405, WebErrorCodes.METHOD_NOT_ALLOWED, 'only GET and HEAD are allowed');
      return true;
    }
    if (isPing) {
      send(req, res, 200, 'application/json', JSON.stringify(options.ping()));
      return true;
    }
    if (isSchedule) {
      const schedule = options.maintenance?.();
      if (schedule) send(req, res, 200, 'application/yaml; charset=utf-8', formatMaintenanceConfig(schedule));
      else sendError(req, res, 404, WebErrorCodes.SCHEDULE_NOT_CONFIGURED, 'this proxy has no cluster_maintenance_config');
      return true;
    }
    if (isFind) {
      const query = parseFindQuery(target);
      if (query.kind === 'invalid') sendError(req, res, 400, query.code, query.reason);
      else if (query.kind === 'find') {
        const answer = options.find?.(query.host, query.group) ?? { managed: false };
        send(req, res, 200, 'application/json', JSON.stringify({ auto_update: answer }));
      }
      return true;
    }
    if (!channelPath || channelPath.kind === 'other') return false; // unreachable: narrowed above
    if (channelPath.kind === 'invalid') {
      sendError(req, res, 400, WebErrorCodes.INVALID_CHANNEL_NAME, channelPath.reason);
      return true;
    }
    const { name, verb } = channelPath;
    if (verb !== CHANNEL_VERB_VERSION && verb !== CHANNEL_VERB_CRITICAL) {
      sendError(req, res, 404, WebErrorCodes.UNKNOWN_ENDPOINT, `unknown channel endpoint "${verb}"`);
      return true;
    }
    const answer = verb === CHANNEL_VERB_VERSION ? options.channels.version(name) : options.channels.critical(name);
    answer.then(
      (text) => send(req, res, 200, 'text/plain; charset=utf-8', text),
      (err: unknown) => {
        if (isGateError(err, ErrorCodes.CHANNEL_NOT_FOUND)) {
          sendError(req, res, 404, WebErrorCodes.CHANNEL_NOT_FOUND, `no channel named "${name}"`);
        } else if (isGateError(err, ErrorCodes.CHANNEL_NAME_INVALID)) {
          sendError(req, res, 400, WebErrorCodes.INVALID_CHANNEL_NAME, err.message);
        } else if (isGateError(err, ErrorCodes.CHANNEL_UPSTREAM)) {
          // The details (upstream URL, status) stay in the log: they are not the client's business.
          sendError(req, res, 502, WebErrorCodes.UPSTREAM_FAILED, `channel "${name}" could not get a ${verb} answer from its upstream`);
        } else {
          log.error({ err, channel: name, verb }, 'version channel lookup failed');
          sendError(req, res, 500, WebErrorCodes.INTERNAL, 'internal error');
        }
      },
    );
    return true;
  };
}

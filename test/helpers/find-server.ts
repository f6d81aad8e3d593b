import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Teardownable } from './daemon.js';
import { closeServer, listening } from './net.js';

/** One answer of the stand-in: a status and a body (JSON text or plain). */
export interface Answer {
  status: number;
  body: string;
}

export interface FindServer {
  /** `http://127.0.0.1:<port>` (the updater is given --insecure-http). */
  url: string;
  /** What `/v1/webapi/find` answers next (default 404: a proxy without rollouts). */
  find: Answer;
  /** What the channel's `/version` and `/critical` answer. */
  channelVersion: string;
  /** Every request's path and query, in order. */
  requests: string[];
}

/** A rollout answer as the proxy's find endpoint writes it (the contract, docs/updates.md). */
export function managed(agentVersion: string, now: boolean, reason = ''): Answer {
  return {
    status: 200,
    body: JSON.stringify({ auto_update: { managed: true, agent_version: agentVersion, agent_auto_update: now, reason } }),
  };
}

/**
 * A tiny real HTTP server on loopback answering what a proxy's web port answers the updater: the
 * find endpoint as the contract says (set `find` per case), the channel endpoints
 * (`channelVersion`, never critical) and 404 for the rest. Closed at teardown.
 */
export async function startFindServer(t: Teardownable): Promise<FindServer> {
  const state: FindServer = {
    url: '',
    find: { status: 404, body: '{"error":{"code":"GATE_ERR_NOT_FOUND","message":"no such path"}}' },
    channelVersion: 'v1.2.3',
    requests: [],
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    state.requests.push(url);
    const path = url.split('?')[0];
    const answer: Answer =
      path === '/v1/webapi/find'
        ? state.find
        : /^\/v1\/webapi\/automaticupgrades\/channel\/[^/]+(?:\/[^/]+)*\/version$/.test(path!)
          ? { status: 200, body: state.channelVersion }
          : /\/critical$/.test(path!)
            ? { status: 200, body: 'no' }
            : { status: 404, body: '{"error":{"code":"GATE_ERR_NOT_FOUND","message":"no such path"}}' };
    res.writeHead(answer.status, { 'content-type': answer.body.startsWith('{') ? 'application/json' : 'text/plain' });
    res.end(answer.body);
  });
  const port = await listening(server);
  t.teardown(() => closeServer(server));
  state.url = `http://127.0.0.1:${port}`;
  return state;
}

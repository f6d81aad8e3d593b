import { ErrorCodes } from '../errors.js';

/**
 * What a client is told when its route fails before any upstream byte reached it (issue 41): the
 * proxy knows why (it logs the code), so the user's own client should print it too. Each protocol's
 * answer (postgres.ts, mysql.ts, ...) is made from this one description; nothing in it comes from
 * the client, and the text is built from a fixed table of words, the agent's name (from the
 * proxy's configuration) and codes, so a client never reads back anything it or an agent sent.
 */

/**
 * How a failure is told apart by protocols that have words for it: SQLSTATE classes, HTTP status
 * codes, SSH disconnect reasons, MySQL error numbers.
 * - `unavailable`: nothing to reach now (agent offline, not admitted)
 * - `denied`: the agent refused the target (its allow-list)
 * - `busy`: a connection cap or overload; worth retrying later
 * - `timeout`: the dial did not finish in time
 * - `failed`: anything else on the way to the upstream
 */
export type FailureKind = 'unavailable' | 'denied' | 'busy' | 'timeout' | 'failed';

export interface RouteFailure {
  /** The code the proxy logged for the connection (GATE_ERR_*). */
  code: string;
  /** The agent's own code inside a tunnel failure (the agent's dial refused, timed out), if any. */
  detail: string | undefined;
  kind: FailureKind;
  /** One line: `gate: agent "db-1" is offline (GATE_ERR_AGENT_OFFLINE)`; printable ASCII only. */
  text: string;
  /** What the user can do about it, when there is something; printable ASCII only. */
  hint: string | undefined;
}

/** What was dialled: the upstream itself, or an agent's target (`agent "db-1": the target`). */
function dialled(who: string): string {
  return who === DIRECT ? DIRECT : `${who}: the target`;
}

/** What failed, for a route with no agent (the proxy dials the upstream itself). */
const DIRECT = 'the upstream';

interface Words {
  kind: FailureKind;
  /** The failure, after the name of what failed (`agent "db-1"`, `the upstream`). */
  says: (who: string) => string;
  hint?: string;
}

/** The codes a route's failure reaches a client with, in words. */
const WORDS: Record<string, Words> = {
  [ErrorCodes.AGENT_OFFLINE]: {
    kind: 'unavailable',
    says: (who) => `${who} is offline`,
    hint: 'The agent is not connected to the proxy: start it, or check its connection to the proxy.',
  },
  [ErrorCodes.AGENT_NOT_CONNECTED]: {
    kind: 'unavailable',
    says: (who) => `${who} is not connected`,
    hint: 'The agent is not connected to the proxy: start it, or check its connection to the proxy.',
  },
  [ErrorCodes.AGENT_VERSION_INCOMPATIBLE]: {
    kind: 'unavailable',
    says: (who) => `${who} runs a version the proxy does not admit`,
    hint: 'Update the agent to a version the proxy accepts (at most one major version behind, never ahead).',
  },
  [ErrorCodes.AGENT_TARGET_DENIED]: {
    kind: 'denied',
    says: (who) => `${who} refused this route's target (not in its allow-list)`,
    hint: "Add the target to the agent's allow-list (--allow), or fix the route.",
  },
  [ErrorCodes.AGENT_STREAM_FAILED]: { kind: 'failed', says: (who) => `${who} could not carry the connection to its target` },
  [ErrorCodes.DIAL_REFUSED]: { kind: 'failed', says: (who) => `${dialled(who)} refused the connection` },
  [ErrorCodes.DIAL_FAILED]: { kind: 'failed', says: (who) => `${dialled(who)} could not be reached` },
  [ErrorCodes.DIAL_TIMEOUT]: { kind: 'timeout', says: (who) => `${dialled(who)} did not answer in time` },
  [ErrorCodes.PEER_DIAL_FAILED]: { kind: 'unavailable', says: (who) => `${who} is held by a proxy this one cannot reach` },
  [ErrorCodes.DRAINING]: { kind: 'busy', says: (who) => `${who} is held by a proxy that is shutting down`, hint: 'Try again.' },
  [ErrorCodes.STORE_UNAVAILABLE]: { kind: 'unavailable', says: (who) => `${who} cannot be located (the cluster store is unavailable)` },
};

/**
 * Codes not in the table (a code added later, GATE_ERR_AGENT_BUSY for an agent at its cap) are
 * classed by their name, so a new overload code is answered as overload without a change here.
 */
const GENERIC: Array<[RegExp, Words]> = [
  [/BUSY|TOO_MANY|RATE_LIMITED|SHED|LIMIT|FULL/, { kind: 'busy', says: (who) => `${who} is busy`, hint: 'Try again later.' }],
  [/TIMEOUT/, { kind: 'timeout', says: (who) => `${who} did not answer in time` }],
  [/./, { kind: 'failed', says: (who) => `the route to ${who} failed` }],
];

/** Our code's shape: nothing else is ever put into an answer. */
const CODE = /^GATE_ERR_[A-Z0-9_]{1,48}$/;
/** A code the registry appended to a tunnel failure's message: the agent's own (`... (GATE_ERR_DIAL_REFUSED)`). */
const TRAILING_CODE = /\((GATE_ERR_[A-Z0-9_]{1,48})\)$/;
/** Agent names are checked by the configuration; this keeps an answer printable whatever a caller passes. */
const NAME = /^[A-Za-z0-9._@:-]{1,64}$/;

function wordsFor(code: string): Words {
  const known = WORDS[code];
  if (known) return known;
  for (const [pattern, words] of GENERIC) if (pattern.test(code)) return words;
  // The last pattern matches any code; this keeps the function total.
  return { kind: 'failed', says: (who) => `the route to ${who} failed` };
}

/**
 * The description of a failed route for its client. `error` is the connection's failure as the
 * proxy records it; `agent` names the agent of a `tunnel:` route (undefined for a direct upstream).
 */
export function describeFailure(error: { code?: unknown; message?: unknown }, agent?: string): RouteFailure {
  const code = typeof error.code === 'string' && CODE.test(error.code) ? error.code : ErrorCodes.HANDLER_FAILED;
  const inner = typeof error.message === 'string' ? TRAILING_CODE.exec(error.message)?.[1] : undefined;
  const detail = inner !== undefined && inner !== code ? inner : undefined;
  // A tunnel failure that carries the agent's own code is told by that code (its dial timed out,
  // was refused), with both codes shown: the proxy's, which its log has, and the agent's.
  const words = wordsFor(detail !== undefined && code === ErrorCodes.AGENT_STREAM_FAILED ? detail : code);
  const who = agent !== undefined && NAME.test(agent) ? `agent "${agent}"` : DIRECT;
  const codes = detail !== undefined ? `${code}, agent: ${detail}` : code;
  return { code, detail, kind: words.kind, text: `gate: ${words.says(who)} (${codes})`, hint: words.hint };
}

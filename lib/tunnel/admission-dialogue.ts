// The admission dialogue with an agent whose certificate was accepted (registry.ts): the proxy
// asks it to describe itself, admits it on a valid description of a version it accepts (its
// verdict: it ends its side of the describe stream), refuses it otherwise, and reads its later
// lines as changes. The registry holds the agents; this is what is said with each before and after.
import { ErrorCodes, GateError, toGateError } from '../errors.js';
import type { LogLimiter } from '../log-limiter.js';
import type { Logger } from '../log.js';
import { MAX_DESCRIPTION_BYTES, readDescription, type AgentDescription } from './agent-description.js';
import type { AgentLink, DescribeRequest } from './agent-link.js';
import { serverIdForName } from './server-id.js';
import { versionRefusal } from './version-rule.js';

/** An agent's tunnel as the dialogue reads and updates it. */
export interface DialogueEntry {
  name: string;
  remote: string;
  link: AgentLink;
  since: number;
  /** True once admitted (claimed its name): until then it is only being described. */
  admitted?: boolean;
  /** What the agent said about itself (its latest valid description). */
  description?: AgentDescription;
  /** Why the proxy ended the session itself, for the disconnect reason. */
  endedBy?: string;
}

/** What the dialogue asks of the registry. */
export interface DialogueHost<E extends DialogueEntry = DialogueEntry> {
  /** Milliseconds the agent has to describe itself (the heartbeat deadline). */
  readonly timeoutMs: number;
  /** The proxy's version, for the version rule (unset: every version is admitted). */
  readonly version: string | undefined;
  readonly log: Logger;
  /** Refusals repeat with every retry: logged per code with a limit. */
  readonly refusalLog: LogLimiter;
  /** Claims the agent's name; false when another tunnel holds it. */
  claim(entry: E): boolean;
  /** Refuses an agent whose session has started: GOAWAY with the code, then the connection ends. */
  refuse(entry: E, error: GateError): void;
  /** Counts a refusal by its code (a metric). */
  count(error: GateError): void;
  /** Ends the tunnel now. */
  end(entry: E): void;
  /** The agent was admitted (the registry says so: 'agent-connected'). */
  admitted(name: string): void;
  /** A connected agent's description changed ('agent-described'). */
  described(name: string): void;
}

/**
 * Asks the agent to describe itself and admits it on the answer: a valid description of a
 * version the rule accepts, or a 4xx from an agent older than descriptions (admitted
 * undescribed). The agent's later lines update its description. A refusal (an incompatible
 * version, a description that cannot be read, a name claimed meanwhile) is told in a GOAWAY.
 * No answer within the heartbeat deadline ends the session.
 */
export function askDescription<E extends DialogueEntry>(entry: E, host: DialogueHost<E>, duplicate: () => GateError): void {
  const { link, name } = entry;
  const { timeoutMs } = host;
  const deadline = setTimeout(() => {
    entry.endedBy = `the agent did not describe itself within ${timeoutMs} ms`;
    host.log.warn({ agent: name, remote: entry.remote, code: ErrorCodes.AGENT_HEARTBEAT_TIMEOUT }, entry.endedBy);
    host.end(entry);
  }, timeoutMs);
  deadline.unref();
  link.once('close', () => clearTimeout(deadline));
  const admit = (description: AgentDescription | undefined): void => {
    clearTimeout(deadline);
    if (!link.usable) return;
    const refusal = description && host.version !== undefined ? versionRefusal(host.version, description.version) : undefined;
    if (refusal) return host.refuse(entry, refusal);
    if (!host.claim(entry)) return host.refuse(entry, duplicate());
    entry.description = description;
    entry.admitted = true;
    entry.since = Date.now();
    request?.admit(); // the verdict: admitted
    host.log.info(
      {
        agent: name,
        remote: entry.remote,
        ...(description ? { serverId: description.serverId, version: description.version, upgrader: description.upgrader } : {}),
      },
      'agent connected',
    );
    host.admitted(name);
  };
  let request: DescribeRequest | undefined;
  request = link.describe(MAX_DESCRIPTION_BYTES, {
    answer: (status) => {
      if (status === 200) return;
      // An agent that does not describe itself refuses the stream with a 4xx: admitted undescribed.
      if (status >= 400 && status < 500) return admit(undefined);
      host.refuse(
        entry,
        new GateError(ErrorCodes.AGENT_DESCRIPTION_INVALID, `the agent answered the describe request with status ${status}`),
      );
    },
    line: (line) => takeDescription(entry, host, line, request, admit),
    overflow: (bytes) =>
      badDescription(
        host,
        entry,
        request,
        new GateError(
          ErrorCodes.AGENT_DESCRIPTION_INVALID,
          `the agent's self-description is refused: a line of more than ${MAX_DESCRIPTION_BYTES} bytes (${bytes} so far)`,
        ),
      ),
  });
  if (!request) {
    host.log.debug({ agent: name }, 'describe request not sent');
    clearTimeout(deadline);
    link.destroy();
  }
}

/** One description line: the first admits (or refuses) the agent, later ones update it. */
function takeDescription<E extends DialogueEntry>(
  entry: E,
  host: DialogueHost<E>,
  line: Buffer,
  request: DescribeRequest | undefined,
  admit: (d: AgentDescription) => void,
): void {
  let read;
  try {
    read = readDescription(line);
  } catch (err) {
    return badDescription(host, entry, request, toGateError(err, ErrorCodes.AGENT_DESCRIPTION_INVALID));
  }
  const { description, sanitised } = read;
  if (sanitised.length > 0) {
    host.refusalLog.log(
      'warn',
      ErrorCodes.AGENT_DESCRIPTION_INVALID,
      { agent: entry.name, remote: entry.remote, code: ErrorCodes.AGENT_DESCRIPTION_INVALID, sanitised },
      `the agent's self-description was sanitised (${sanitised.join(', ')})`,
    );
  }
  // An agent speaks only for itself (issue 37): its server ID is the one its certificate's name
  // gives it, so no agent can name another's inventory row, however predictable the IDs are.
  const bound = serverIdForName(entry.name);
  if (description.serverId !== bound) {
    return badDescription(
      host,
      entry,
      request,
      new GateError(
        ErrorCodes.AGENT_SERVER_ID_MISMATCH,
        `the agent's self-description is refused: server ID ${description.serverId} is not agent ${entry.name}'s (${bound}, from its certificate's name)`,
      ),
    );
  }
  if (!entry.admitted) return admit(description);
  const was = entry.description;
  // A running process cannot change its version or its server ID: such a line is not believed.
  if (was && (was.serverId !== description.serverId || was.version !== description.version)) {
    return badDescription(
      host,
      entry,
      request,
      new GateError(
        ErrorCodes.AGENT_DESCRIPTION_INVALID,
        `the agent's self-description is refused: server ID and version cannot change during a tunnel`,
      ),
    );
  }
  entry.description = description;
  host.described(entry.name);
}

/**
 * A description the proxy cannot take. Before admission the agent is refused; after it, only
 * the describe stream is reset (the last valid description stays) and the tunnel's other
 * streams go on.
 */
function badDescription<E extends DialogueEntry>(
  host: DialogueHost<E>,
  entry: E,
  request: DescribeRequest | undefined,
  error: GateError,
): void {
  if (!entry.admitted) return host.refuse(entry, error);
  host.count(error);
  host.refusalLog.log('warn', error.code, { agent: entry.name, remote: entry.remote, code: error.code }, error.message);
  request?.refuse();
}

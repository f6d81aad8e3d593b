/**
 * One connected agent as a sessions store holds it. A store reads `name` and whether the tunnel is
 * still usable, and hands back the entry it was given: the registry's own entry carries the whole
 * tunnel (tunnel/agent-link.ts), which stays internal, so the public shape names only what a store
 * needs of it (issue 39).
 */
export interface AgentSessionEntry {
  name: string;
  /** Its tunnel: `usable` while new streams may be opened (a claim may take a name whose holder's is not). */
  link: { readonly usable: boolean };
  /** `address:port` the agent connected from, for logs. */
  remote: string;
  /** Epoch milliseconds the tunnel came up. */
  since: number;
}

/**
 * Where the proxy keeps which agent is connected: claimed when a tunnel is admitted, released when
 * it ends, looked up for every stream. An interface because peering may put it behind a
 * store shared by proxies; this process's `LocalAgentSessions` is the only implementation today.
 */
export interface AgentSessions {
  /** Takes `entry.name` for `entry`; false when another live session holds it (nothing changes). */
  claim(entry: AgentSessionEntry): boolean;
  /** Gives the name up, if `entry` still holds it (a refused or replaced entry releases nothing). */
  release(entry: AgentSessionEntry): boolean;
  get(name: string): AgentSessionEntry | undefined;
  names(): string[];
}

/** The in-process store: a map by agent name. */
export class LocalAgentSessions implements AgentSessions {
  private readonly byName = new Map<string, AgentSessionEntry>();

  claim(entry: AgentSessionEntry): boolean {
    const held = this.byName.get(entry.name);
    if (held && held !== entry && held.link.usable) return false;
    this.byName.set(entry.name, entry);
    return true;
  }

  release(entry: AgentSessionEntry): boolean {
    if (this.byName.get(entry.name) !== entry) return false;
    this.byName.delete(entry.name);
    return true;
  }

  get(name: string): AgentSessionEntry | undefined {
    return this.byName.get(name);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }
}

import { GateError, ErrorCodes } from '../errors.js';
import type { DetectedProtocol } from '../handlers/types.js';
import type { Route } from './types.js';

/** What the router knows when it chooses: detected protocol plus, for TLS, SNI and offered ALPN. */
export interface RouteQuery {
  protocol: DetectedProtocol;
  sni: string | undefined;
  alpn: readonly string[];
}

interface CompiledRoute {
  route: Route;
  order: number;
  protocols: ReadonlySet<DetectedProtocol> | undefined;
  sniExact: ReadonlySet<string>;
  /** `*.example.com` kept as `.example.com`, longest first. */
  sniSuffixes: readonly string[];
  sniPrefixes: readonly string[];
  alpnExact: ReadonlySet<string>;
  alpnPrefixes: readonly string[];
  hasSni: boolean;
  hasAlpn: boolean;
}

/**
 * Tiers of SNI match, best first. Precedence (documented in docs/multiplexer.md, "How a connection is routed"):
 * exact SNI > SNI prefix > `*.suffix` wildcard > no SNI condition; then, among routes in the
 * same tier, one whose ALPN condition matches the client's most preferred protocol; then a
 * route without ALPN condition (protocol default); then declaration order.
 */
const SNI_EXACT = 3;
const SNI_PREFIX = 2;
const SNI_WILDCARD = 1;
const SNI_NONE = 0;

function list<T>(value: T | readonly T[] | undefined): T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? [...(value as T[])] : [value as T];
}

function compile(route: Route, order: number): CompiledRoute {
  const { match } = route;
  const sniExact = new Set<string>();
  const sniSuffixes: string[] = [];
  for (const name of list(match.sni)) {
    const lower = name.toLowerCase();
    if (lower.startsWith('*.') && lower.length > 2) sniSuffixes.push(lower.slice(1));
    else if (lower.includes('*')) throw invalid(route, `SNI pattern '${name}' may only start with '*.'`);
    else if (lower.length > 0) sniExact.add(lower);
    else throw invalid(route, 'empty SNI name');
  }
  sniSuffixes.sort((a, b) => b.length - a.length);
  const sniPrefixes = list(match.sniPrefix).map((p) => p.toLowerCase());
  const alpnExact = new Set(list(match.alpn));
  const alpnPrefixes = list(match.alpnPrefix);
  const hasSni = sniExact.size + sniSuffixes.length + sniPrefixes.length > 0;
  const hasAlpn = alpnExact.size + alpnPrefixes.length > 0;
  let protocols: Set<DetectedProtocol> | undefined;
  if (match.protocol !== undefined) protocols = new Set(list(match.protocol));
  // TLS conditions imply TLS, including TLS that follows a Postgres SSLRequest.
  else if (hasSni || hasAlpn) protocols = new Set(['tls', 'postgres']);
  else throw invalid(route, 'a route needs at least one of sni, sniPrefix, alpn, alpnPrefix, protocol');
  if ((hasSni || hasAlpn) && !protocols.has('tls') && !protocols.has('postgres')) {
    throw invalid(route, 'SNI and ALPN conditions only make sense with protocol tls or postgres');
  }
  return { route, order, protocols, sniExact, sniSuffixes, sniPrefixes, alpnExact, alpnPrefixes, hasSni, hasAlpn };
}

function invalid(route: Route, why: string): GateError {
  return new GateError(ErrorCodes.INVALID_ARGUMENT, `route '${route.name}': ${why}`);
}

function sniTier(r: CompiledRoute, sni: string | undefined): [tier: number, specificity: number] | undefined {
  if (!r.hasSni) return [SNI_NONE, 0];
  if (sni === undefined) return undefined;
  if (r.sniExact.has(sni)) return [SNI_EXACT, sni.length];
  let best = -1;
  for (const prefix of r.sniPrefixes) if (sni.startsWith(prefix) && prefix.length > best) best = prefix.length;
  if (best >= 0) return [SNI_PREFIX, best];
  // Suffixes are sorted longest first, so the first hit is the most specific one.
  for (const suffix of r.sniSuffixes) if (sni.length > suffix.length && sni.endsWith(suffix)) return [SNI_WILDCARD, suffix.length];
  return undefined;
}

/** Index of the first client-offered ALPN this route accepts, -1 for none. */
function alpnIndex(r: CompiledRoute, alpn: readonly string[]): number {
  for (let i = 0; i < alpn.length; i++) {
    const offered = alpn[i]!;
    if (r.alpnExact.has(offered)) return i;
    for (const prefix of r.alpnPrefixes) if (offered.startsWith(prefix)) return i;
  }
  return -1;
}

/** An immutable, validated set of routes; `select` is pure and allocation-free on the hot path. */
export class RouteTable {
  private readonly compiled: readonly CompiledRoute[];
  private readonly named: ReadonlyMap<string, Route>;

  constructor(routes: readonly Route[]) {
    const named = new Map<string, Route>();
    for (const route of routes) {
      if (!route.name) throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'every route needs a name');
      if (named.has(route.name)) throw invalid(route, 'duplicate route name');
      named.set(route.name, route);
    }
    this.named = named;
    this.compiled = routes.map(compile);
  }

  get(name: string): Route | undefined {
    return this.named.get(name);
  }

  get routes(): Route[] {
    return this.compiled.map((c) => c.route);
  }

  select(query: RouteQuery): Route | undefined {
    let best: CompiledRoute | undefined;
    let bestTier = -1;
    let bestSpecificity = -1;
    let bestAlpn = Number.MAX_SAFE_INTEGER; // lower index = client prefers it; "none" ranks last
    for (const r of this.compiled) {
      if (r.protocols && !r.protocols.has(query.protocol)) continue;
      const tier = sniTier(r, query.sni);
      if (!tier) continue;
      let alpnRank = Number.MAX_SAFE_INTEGER - 1; // a route without ALPN condition
      if (r.hasAlpn) {
        const i = alpnIndex(r, query.alpn);
        if (i < 0) continue;
        alpnRank = i;
      }
      const better =
        tier[0] > bestTier || (tier[0] === bestTier && (tier[1] > bestSpecificity || (tier[1] === bestSpecificity && alpnRank < bestAlpn)));
      if (better) {
        best = r;
        bestTier = tier[0];
        bestSpecificity = tier[1];
        bestAlpn = alpnRank;
      }
    }
    return best?.route;
  }
}

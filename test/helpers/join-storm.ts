/**
 * A fleet joining, then renewing, all at once: what the proxy must serve without stalling routing
 * (a fleet provisioned together, or every agent renewing after an outage). Used by the legitimate
 * load test (test/hardening/guarded/join-storm.test.ts) and the bench (bench/join-storm.ts).
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { buildRequest } from '../../lib/pki/certificate-request.js';
import { AGENT_JOIN_PATH, AGENT_RENEW_PATH } from '../../lib/wire/names.js';
import { inParallel, webRequest, type WebAnswer, type WebTarget } from './web-abuse.js';

export interface StormAgent {
  name: string;
  /** PEM private key (PKCS#8) and the request for it. */
  key: string;
  csr: string;
  /** Set once joined: the certificate it renews with. */
  cert?: string;
}

export interface StormOutcome {
  answer: WebAnswer;
  ms: number;
}

/**
 * `count` agents named `<prefix>-<i>`. Keys are shared between agents in groups (RSA-2048 and
 * P-256 alternately, or RSA only, which is all a proxy before the key allow-list read): making 500 RSA keys would take the client tens of seconds, and the proxy's
 * work does not depend on whose key a request carries.
 */
export function stormAgents(count: number, prefix: string, keyTypes: 'rsa' | 'mixed' = 'mixed'): StormAgent[] {
  const keys: KeyObject[] = [];
  for (let i = 0; i < 8; i++) {
    keys.push(
      i % 2 === 0 || keyTypes === 'rsa'
        ? generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
        : generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
    );
  }
  return Array.from({ length: count }, (_, i) => {
    const key = keys[i % keys.length]!;
    const name = `${prefix}-${i}`;
    return { name, key: key.export({ type: 'pkcs8', format: 'pem' }).toString(), csr: buildRequest(name, key) };
  });
}

async function timedRequest(run: () => Promise<WebAnswer>): Promise<StormOutcome> {
  const started = performance.now();
  const answer = await run();
  return { answer, ms: performance.now() - started };
}

/** Every agent joins with `token`, `concurrency` at a time, each on a fresh connection; joined agents get their `cert`. */
export async function joinStorm(target: WebTarget, token: string, agents: StormAgent[], concurrency: number): Promise<StormOutcome[]> {
  return inParallel(agents.length, concurrency, async (i) => {
    const agent = agents[i]!;
    const outcome = await timedRequest(() =>
      webRequest(target, AGENT_JOIN_PATH, { body: JSON.stringify({ name: agent.name, token, csr: agent.csr }) }),
    );
    if (outcome.answer.status === 200) agent.cert = (JSON.parse(outcome.answer.body) as { cert: string }).cert;
    return outcome;
  });
}

/** Every joined agent renews with its certificate (mutual TLS), sending a new request for the same key. */
export async function renewStorm(target: WebTarget, agents: StormAgent[], concurrency: number): Promise<StormOutcome[]> {
  return inParallel(agents.length, concurrency, async (i) => {
    const agent = agents[i]!;
    return timedRequest(() =>
      webRequest(target, AGENT_RENEW_PATH, { body: JSON.stringify({ csr: agent.csr }), cert: agent.cert ?? '', key: agent.key }),
    );
  });
}

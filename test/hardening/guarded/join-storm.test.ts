// Legitimate load: a fleet joining and then renewing all at once, from one source (a NAT), under
// the ping guard. Every agent served (the default rate limits never refuse a real fleet), every
// ping within 250 ms. The bench (bench/join-storm.ts) runs the same with 500 agents.
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { startGuardedProxy, underPingGuard } from '../../helpers/ping-guard.js';
import { joinStorm, renewStorm, stormAgents } from '../../helpers/join-storm.js';

const AGENTS = 150;
const IN_FLIGHT = 20;

t.test(`${AGENTS} agents join, then renew, ${IN_FLIGHT} at a time: all served, routing unaffected`, async (t) => {
  const proxy = await startGuardedProxy(t);
  const agents = stormAgents(AGENTS, 'fleet');
  const joins = await underPingGuard(t, proxy, `${AGENTS} joins`, () => joinStorm(proxy, proxy.devToken, agents, IN_FLIGHT));
  t.same(
    joins.filter((j) => j.answer.status !== 200).map((j) => j.answer.code),
    [],
    'every join served',
  );
  const first = new X509Certificate(agents[0]!.cert!);
  t.match(first.subject, /CN=fleet-0/, 'each certificate names its agent');
  t.ok(first.verify(new X509Certificate(proxy.ca).publicKey), 'signed by the cluster CA');
  const renewals = await underPingGuard(t, proxy, `${AGENTS} renewals`, () => renewStorm(proxy, agents, IN_FLIGHT));
  t.same(
    renewals.filter((r) => r.answer.status !== 200).map((r) => r.answer.code),
    [],
    'every renewal served',
  );
});

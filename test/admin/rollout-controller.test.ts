// The rollout's pure parts: the manifests (every problem keyed), the state machine (canaries,
// max_in_flight, wait, windows, automatic halts, suspended, a new target), the find answers, the
// operator's commands, and a lease handoff that continues from the stored document without
// repeating a step.
import t from 'tap';
import { readManifests } from '../../lib/admin/manifest.js';
import { advanceRollout, inWindow, type RolloutAgent } from '../../lib/admin/rollout-controller.js';
import { inFlightLimit, rolloutConfigOf, rolloutVersionOf, type RolloutConfig, type RolloutVersion } from '../../lib/admin/rollout-spec.js';
import { applyCommand, findAnswer, rolloutDocument, rolloutStateOf, type RolloutState } from '../../lib/admin/rollout-state.js';
import { ErrorCodes } from '../../lib/errors.js';

const MANIFESTS = `
kind: autoupdate_config
version: v1
spec:
  agents:
    mode: enabled
    strategy: halt-on-error
    canary_timeout: 1h
    schedules:
      regular:
        - name: dev
          days: [Mon, Tue, Wed, Thu]
          start_hour: 4
          canary_count: 2
        - name: prod
          days: [Mon, Tue, Wed, Thu]
          start_hour: 4
          wait: 24h
          max_in_flight: 20%
---
kind: autoupdate_version
version: v1
spec:
  agents:
    start_version: 1.2.3
    target_version: 1.3.0
    mode: enabled
`;

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Monday 30 November 2026, 04:10 UTC: in both groups' window. */
const MONDAY_4 = Date.UTC(2026, 10, 30, 4, 10);

function parsed(text = MANIFESTS): { config: RolloutConfig; version: RolloutVersion } {
  const read = readManifests(text);
  if (read.issues.length > 0) throw new Error(read.issues.join('\n'));
  return { config: rolloutConfigOf(read.manifests[0]!.document)!, version: rolloutVersionOf(read.manifests[1]!.document)! };
}

const id = (n: number): string => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
/** A fleet: dev-1..dev-3 and prod-1..prod-10, every one on 1.2.3 since long ago. */
function fleet(): RolloutAgent[] {
  return [
    // One host name for all: messages name agents by their certificate's name.
    ...[1, 2, 3].map((n) => ({ serverId: id(n), name: `dev-${n}`, hostname: 'shared-host', group: 'dev', version: '1.2.3', since: 0 })),
    ...Array.from({ length: 10 }, (_, i) => ({
      serverId: id(100 + i),
      name: `prod-${i + 1}`,
      hostname: 'shared-host',
      group: 'prod',
      version: '1.2.3',
      since: 0,
    })),
  ];
}
/** The agent restarted at `at` on `version` (what an updater's install does). */
function restart(agents: RolloutAgent[], name: string, version: string, at: number): void {
  const agent = agents.find((a) => a.name === name)!;
  agent.version = version;
  agent.since = at;
}

t.test('manifests: the platform shapes read and normalised; every problem keyed', async (t) => {
  const { config, version } = parsed();
  t.same(
    config.groups.map((g) => [g.name, g.days, g.startHour, g.waitMs, g.canaryCount, g.maxInFlight]),
    [
      ['dev', [1, 2, 3, 4], 4, 0, 2, { percent: 10 }],
      ['prod', [1, 2, 3, 4], 4, 24 * HOUR, 0, { percent: 20 }],
    ],
  );
  t.equal(config.canaryTimeoutMs, HOUR);
  t.same(version, { startVersion: '1.2.3', targetVersion: '1.3.0', mode: 'enabled' });
  const stored = readManifests(MANIFESTS).manifests[0]!.document as { spec: { agents: { schedules: { regular: unknown[] } } } };
  t.same(stored.spec.agents.schedules.regular[1], {
    name: 'prod',
    days: ['Mon', 'Tue', 'Wed', 'Thu'],
    start_hour: 4,
    wait: '24h',
    canary_count: 0,
    max_in_flight: '20%',
  });
  t.equal(parsed(MANIFESTS.replace('wait: 24h', 'wait: 1h30m')).config.groups[1]!.waitMs, 90 * MINUTE, 'durations with units');
  t.same(parsed(MANIFESTS.replace('days: [Mon, Tue, Wed, Thu]', 'days: ["*"]')).config.groups[0]!.days, [0, 1, 2, 3, 4, 5, 6]);
  t.same(parsed(MANIFESTS.replace('max_in_flight: 20%', 'max_in_flight: 3')).config.groups[1]!.maxInFlight, { count: 3 });
  t.equal(inFlightLimit({ percent: 20 }, 10), 2);
  t.equal(inFlightLimit({ percent: 20 }, 3), 1, 'at least one');

  const bad = readManifests(`
kind: autoupdate_config
spec:
  agents:
    mode: on
    strategy: fastest
    canary_timeout: 10
    schedules:
      regular:
        - name: dev
          days: [Mon, Caturday]
          start_hour: 24
          canary_count: -1
          max_in_flight: 0%
          wiat: 1h
        - name: dev
---
kind: autoupdate_version
spec:
  agents:
    start_version: latest
`);
  t.same(bad.manifests, [], 'nothing stored from a set with a problem');
  t.same(bad.issues, [
    'document 1: spec.agents.mode: "on" is not one of enabled, disabled, suspended',
    'document 1: spec.agents.strategy: "fastest" is not one of halt-on-error, time-based',
    'document 1: spec.agents.canary_timeout: number 10 is not a duration with units (48h, 30s, 1h30m) of at most a year',
    'document 1: spec.agents.schedules.regular[0].wiat: unknown key; expected one of: name, days, start_hour, wait, canary_count, max_in_flight',
    'document 1: spec.agents.schedules.regular[0].days[1]: "Caturday" is not a day name (Mon..Sun, Monday..Sunday) or *',
    'document 1: spec.agents.schedules.regular[0].start_hour: 24 is not an hour 0-23 (UTC)',
    'document 1: spec.agents.schedules.regular[0].canary_count: -1 is not a count 0-100',
    'document 1: spec.agents.schedules.regular[0].max_in_flight: "0%" is not a count of agents (1 or more) or a percentage (1%-100%)',
    'document 2: spec.agents.start_version: "latest" is not a version (MAJOR.MINOR.PATCH)',
    'document 2: spec.agents.target_version: required: a version such as 1.3.0',
  ]);
  t.match(readManifests(MANIFESTS.replace('- name: prod', '- name: dev')).issues, [/regular\[1\]\.name: group dev is listed twice/]);
  t.match(readManifests(MANIFESTS.replace('strategy: halt-on-error', 'strategy: time-based')).issues, [
    /regular\[0\]\.canary_count: canaries gate .* not time-based/,
    /regular\[1\]\.wait: wait orders groups .* not time-based/,
  ]);
  t.match(readManifests('kind: autoupdate_agent_rollout\n').issues, [/written by the cluster/]);
});

t.test('halt-on-error: canaries, then the rest of the group in flight, then the next group after its wait', async (t) => {
  const { config, version } = parsed();
  const agents = fleet();
  let now = MONDAY_4;
  const step = (state: RolloutState | undefined) => advanceRollout(state, { config, version, agents, now });

  let { state, events, changed } = step(undefined);
  t.ok(changed);
  t.match(events[0]!.message, /rollout from 1\.2\.3 to 1\.3\.0 begins/);
  t.equal(state!.groups[0]!.state, 'canary', 'dev starts in its window: canaries first');
  t.same(
    state!.groups[0]!.canaries.map((c) => c.name),
    ['dev-1', 'dev-2'],
    'canary_count of its connected agents',
  );
  t.equal(state!.groups[1]!.state, 'unstarted');
  t.equal(state!.groups[1]!.reason, 'waiting for group dev');
  t.same(findAnswer(state, id(1), 'dev'), {
    managed: true,
    agent_version: '1.3.0',
    agent_auto_update: true,
    reason: 'canary of group dev: update to 1.3.0',
  });
  t.same(findAnswer(state, id(3), 'dev'), {
    managed: true,
    agent_version: '1.2.3',
    agent_auto_update: false,
    reason: 'group dev: waiting for its canaries',
  });
  t.same(findAnswer(state, id(100), 'prod'), {
    managed: true,
    agent_version: '1.2.3',
    agent_auto_update: false,
    reason: 'waiting for group dev',
  });
  t.equal(findAnswer(state, id(100), 'no-such-group').reason, 'waiting for group dev', 'an unlisted group follows the last one');

  now += 5 * MINUTE;
  ({ state, changed } = step(state));
  t.equal(state!.groups[0]!.state, 'canary', 'a canary not back yet, within canary_timeout: still canary');
  restart(agents, 'dev-1', '1.3.0', now);
  restart(agents, 'dev-2', '1.3.0', now);
  now += MINUTE;
  ({ state } = step(state));
  t.equal(state!.groups[0]!.state, 'active', 'every canary back on the target: active');
  t.same(
    state!.groups[0]!.told.map((a) => a.name),
    ['dev-3'],
    'the rest told (max_in_flight 10% of 3: one)',
  );
  t.ok(state!.groups[0]!.canaries.every((c) => c.backAt === now));
  restart(agents, 'dev-3', '1.3.0', now + MINUTE);
  now += 2 * MINUTE;
  ({ state } = step(state));
  t.equal(state!.groups[0]!.state, 'done');
  t.equal(state!.groups[0]!.doneAt, now);
  t.match(
    state!.groups[1]!.reason,
    /^waiting until 2026-12-01T04:1\d:00\.000Z \(wait after group dev\)$/,
    'prod waits 24h after dev is done',
  );
  t.same(findAnswer(state, id(3), 'dev'), { managed: true, agent_version: '1.3.0', agent_auto_update: true, reason: 'group dev done' });

  now += 24 * HOUR;
  ({ state } = step(state));
  t.equal(state!.groups[1]!.state, 'active', 'after the wait, in its window: prod starts (no canaries)');
  t.equal(state!.groups[1]!.told.length, 2, 'max_in_flight 20% of 10');
  now += MINUTE;
  ({ state, changed } = step(state));
  t.equal(state!.groups[1]!.told.length, 2, 'no new place while both are in flight');
  restart(agents, state!.groups[1]!.told[0]!.name, '1.3.0', now);
  now += MINUTE;
  ({ state } = step(state));
  t.equal(state!.groups[1]!.told.length, 3, 'one back: one more told');
});

t.test('halt: a canary back on the old version, or not back in time; no other agent is told', async (t) => {
  const { config, version } = parsed();
  const agents = fleet();
  let now = MONDAY_4;
  let { state } = advanceRollout(undefined, { config, version, agents, now });
  // dev-2 restarts (its updater installed and it came back) still on 1.2.3.
  restart(agents, 'dev-2', '1.2.3', now + MINUTE);
  now += 2 * MINUTE;
  const halted = advanceRollout(state, { config, version, agents, now });
  state = halted.state;
  t.equal(state!.groups[0]!.state, 'halted');
  t.equal(state!.groups[0]!.reason, 'canary dev-2 came back on 1.2.3 (expected 1.3.0)');
  const warn = halted.events.find((e) => e.level === 'warn');
  t.equal(warn?.code, ErrorCodes.ROLLOUT_HALTED, 'a warn line with its code');
  t.same(findAnswer(state, id(1), 'dev'), {
    managed: true,
    agent_version: '1.2.3',
    agent_auto_update: false,
    reason: 'halted: canary dev-2 came back on 1.2.3 (expected 1.3.0)',
  });
  t.equal(findAnswer(state, id(3), 'dev').agent_auto_update, false, 'no other agent told');
  restart(agents, 'dev-1', '1.3.0', now);
  now += 30 * HOUR;
  const later = advanceRollout(state, { config, version, agents, now });
  t.equal(later.state!.groups[0]!.state, 'halted', 'a halt stays until an operator acts');
  t.equal(later.state!.groups[1]!.state, 'unstarted', 'the next group never starts');
  t.equal(later.state!.groups[0]!.told.length, 0);

  const timeout = fleet();
  const first = advanceRollout(undefined, { config, version, agents: timeout, now: MONDAY_4 }).state;
  restart(timeout, 'dev-1', '1.3.0', MONDAY_4 + MINUTE);
  const late = advanceRollout(first, { config, version, agents: timeout, now: MONDAY_4 + HOUR + MINUTE });
  t.equal(late.state!.groups[0]!.state, 'halted');
  t.equal(late.state!.groups[0]!.reason, 'canary dev-2 not back on 1.3.0 within 3600s (canary_timeout)');
});

t.test('rollback, start-update, mark-done; suspended; a new target starts over', async (t) => {
  const { config, version } = parsed();
  const agents = fleet();
  let now = MONDAY_4;
  let { state } = advanceRollout(undefined, { config, version, agents, now });
  restart(agents, 'dev-1', '1.3.0', now + MINUTE);
  restart(agents, 'dev-2', '1.2.3', now + MINUTE);
  now += 2 * MINUTE;
  ({ state } = advanceRollout(state, { config, version, agents, now }));
  t.equal(state!.groups[0]!.state, 'halted');
  const rolled = applyCommand(state!, { verb: 'rollback' }, 'alice', now);
  t.equal(rolled.groups[0]!.state, 'rolledback');
  t.equal(rolled.groups[0]!.reason, 'rolled back by alice');
  t.equal(rolled.groups[1]!.state, 'unstarted', 'a group not started is left alone');
  t.same(findAnswer(rolled, id(1), 'dev'), { managed: true, agent_version: '1.2.3', agent_auto_update: true, reason: 'rolled back' });
  const after = advanceRollout(rolled, { config, version, agents, now: now + MINUTE }).state!;
  t.equal(after.groups[0]!.state, 'rolledback', 'the controller keeps a rollback');
  t.throws(() => applyCommand(after, { verb: 'mark-done', group: 'qa' }, 'alice', now), {
    code: ErrorCodes.ROLLOUT_COMMAND_REFUSED,
    message: /no group qa/,
  });

  const restarted = applyCommand(after, { verb: 'start-update', group: 'dev' }, 'alice', now);
  restart(agents, 'dev-2', '1.2.3', 0);
  const again = advanceRollout(restarted, { config, version, agents, now: now + 2 * MINUTE }).state!;
  t.equal(again.groups[0]!.state, 'canary', 'start-update: canaries picked again');
  t.same(
    again.groups[0]!.canaries.map((c) => c.name),
    ['dev-2', 'dev-3'],
    'among those not on the target',
  );
  const skipped = applyCommand(again, { verb: 'mark-done', group: 'dev' }, 'alice', now);
  t.equal(skipped.groups[0]!.state, 'done');
  const prodNow = applyCommand(skipped, { verb: 'start-update', group: 'prod' }, 'alice', now);
  const outOfWindow = Date.UTC(2026, 11, 5, 13, 0); // a Saturday afternoon
  t.equal(inWindow(config.groups[1]!, outOfWindow), false);
  t.equal(
    advanceRollout(prodNow, { config, version, agents, now: outOfWindow }).state!.groups[1]!.state,
    'active',
    'start-update skips wait and window',
  );
  t.throws(() => applyCommand(skipped, { verb: 'start-update', group: 'dev' }, 'alice', now), /dev is done already/);

  const suspended = advanceRollout(state, { config, version: { ...version, mode: 'suspended' }, agents, now }).state!;
  t.equal(suspended.mode, 'suspended');
  t.same(findAnswer(suspended, id(3), 'dev'), { managed: true, agent_version: '1.2.3', agent_auto_update: false, reason: 'suspended' });
  t.same(
    findAnswer(suspended, id(1), 'dev'),
    { managed: true, agent_version: '1.3.0', agent_auto_update: false, reason: 'suspended' },
    'a canary back on the target keeps it',
  );
  t.same(findAnswer({ ...suspended, mode: 'disabled' }, id(1), 'dev'), { managed: false });

  const next = advanceRollout(state, { config, version: { ...version, startVersion: '1.3.0', targetVersion: '1.4.0' }, agents, now });
  t.equal(next.state!.targetVersion, '1.4.0');
  t.equal(next.state!.groups[0]!.state, 'canary', 'a new target: a new rollout, from the first group');
  t.match(next.events[0]!.message, /rollout from 1\.3\.0 to 1\.4\.0 begins/);
  t.equal(advanceRollout(state, { config: undefined, version, agents, now }).state, undefined, 'no config: nothing to roll out');
});

t.test('a lease handoff: the next holder continues from the stored document, repeating nothing', async (t) => {
  const { config, version } = parsed();
  const agents = fleet();
  const first = advanceRollout(undefined, { config, version, agents, now: MONDAY_4 }).state!;
  const stored = JSON.parse(JSON.stringify(rolloutDocument(first, 'autoupdate-agent-rollout', 'autoupdate_agent_rollout'))) as Record<
    string,
    unknown
  >;
  const read = rolloutStateOf(stored);
  t.same(read, first, 'the stored document reads back to the same state');
  const continued = advanceRollout(read, { config, version, agents, now: MONDAY_4 + MINUTE });
  t.equal(continued.changed, false, 'nothing new to do: nothing written');
  t.same(continued.state!.groups[0]!.canaries, first.groups[0]!.canaries, 'the same canaries, told at the same time: not told again');
  t.equal(continued.events.length, 0);
  t.equal(rolloutStateOf({ status: { startVersion: 1 } }), undefined, 'a document that is not a state');
});

t.test('time-based: each group in its own window, no order, no canary', async (t) => {
  const text = MANIFESTS.replace('strategy: halt-on-error', 'strategy: time-based')
    .replace('canary_count: 2', 'max_in_flight: 100%')
    .replace('wait: 24h', 'start_hour: 5')
    .replace(/start_hour: 4\n(\s+)start_hour: 5/, 'start_hour: 5');
  const { config, version } = parsed(text);
  const agents = fleet();
  const at4 = advanceRollout(undefined, { config, version, agents, now: MONDAY_4 }).state!;
  t.equal(at4.groups[0]!.state, 'active');
  t.equal(at4.groups[0]!.told.length, 3, 'the whole of dev (max_in_flight 100%)');
  t.equal(at4.groups[1]!.state, 'unstarted');
  t.match(at4.groups[1]!.reason, /window of group prod \(Mon,Tue,Wed,Thu from 05:00 UTC\)/);
  const at5 = advanceRollout(at4, { config, version, agents, now: MONDAY_4 + HOUR }).state!;
  t.equal(at5.groups[1]!.state, 'active', 'prod in its window, whatever dev is doing');
});

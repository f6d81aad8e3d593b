// The manifests `gate-mux create` takes, read as the configuration file is: every problem with its
// key, a set with any problem refused whole, the valid ones normalised as they are stored. Pure.
import t from 'tap';
import { maintenanceOf, readManifests, rulesOf } from '../../lib/admin/manifest.js';
import { rulesAllow } from '../../lib/admin/permissions.js';

const WINDOW = `kind: cluster_maintenance_config
spec:
  agent_upgrades:
    utc_start_hour: 2
    weekdays: [Mon, wednesday]
`;

// The role as the platform's document writes it.
const ROLE = `kind: role
version: v7
metadata:
  name: maintenance-admin
spec:
  allow:
    rules:
      - resources: [cluster_maintenance_config]
        verbs: [create, read, update, delete]
`;

t.test('the platform manifest: stored with every weekday spelled out, one per cluster', async (t) => {
  const read = readManifests(WINDOW);
  t.same(read.issues, []);
  t.same(read.manifests, [
    {
      kind: 'cluster_maintenance_config',
      name: 'cluster-maintenance-config',
      document: {
        kind: 'cluster_maintenance_config',
        version: 'v1',
        metadata: { name: 'cluster-maintenance-config' },
        spec: { agent_upgrades: { utc_start_hour: 2, weekdays: ['Monday', 'Wednesday'] } },
      },
    },
  ]);
  t.same(maintenanceOf(read.manifests[0]!.document), { utcStartHour: 2, weekdays: [1, 3] });
  const everyDay = readManifests('kind: cluster_maintenance_config\nspec: {agent_upgrades: {utc_start_hour: 0}}\n');
  t.same(maintenanceOf(everyDay.manifests[0]!.document)?.weekdays, [0, 1, 2, 3, 4, 5, 6], 'no weekdays: every day, as gate.yaml reads it');
});

t.test('every problem of a manifest, each with its key; nothing valid comes out', async (t) => {
  const read = readManifests(
    'kind: cluster_maintenance_config\nversion: v2\nspec:\n  agent_upgrades:\n    utc_start_hour: 24\n    weekdays: [Funday, Mon, 3]\n    start: 1\n',
  );
  t.same(read.manifests, []);
  t.same(read.issues, [
    'version: expected v1, got "v2"',
    'spec.agent_upgrades.start: unknown key; expected one of: utc_start_hour, weekdays',
    'spec.agent_upgrades.utc_start_hour: 24 is not an hour 0–23',
    'spec.agent_upgrades.weekdays[0]: "Funday" is not a day name (Sun..Sat or Sunday..Saturday)',
    'spec.agent_upgrades.weekdays[2]: number 3 is not a day name (Sun..Sat or Sunday..Saturday)',
  ]);
  t.same(readManifests('spec: {}\n').issues, ['kind: required: cluster_maintenance_config, role, autoupdate_config or autoupdate_version']);
  t.same(readManifests('kind: user\n').issues, ['kind: users are made with gate-mux users add (which issues their identity file)']);
  t.same(readManifests('kind: [\n').issues.length, 1, 'not YAML');
  t.match(readManifests('kind: [\n').issues[0], /^\(top level\): not YAML: /);
  t.same(readManifests('').issues, ['(document): empty: expected a manifest with a kind']);
});

t.test('several documents: one bad one refuses them all, each problem says which document', async (t) => {
  const read = readManifests(
    `${ROLE}---\nkind: role\nversion: v6\nmetadata: {name: "bad name"}\nspec:\n  allow:\n    rules:\n      - resources: [nodes]\n        verbs: [read, sudo]\n`,
  );
  t.same(read.manifests, []);
  t.same(read.issues, [
    'document 2: version: expected v7, got "v6"',
    'document 2: metadata.name: expected a role name (letters, digits, ".", "_", "-"), got "bad name"',
    'document 2: spec.allow.rules[0].resources[0]: "nodes" is not one of cluster_maintenance_config, role, user, inventory, autoupdate_config, autoupdate_version, autoupdate_agent_rollout, *',
    'document 2: spec.allow.rules[0].verbs[1]: "sudo" is not one of create, read, list, update, delete, *',
  ]);
  const both = readManifests(`${ROLE}---\n${WINDOW}`);
  t.same(
    both.manifests.map((m) => `${m.kind}/${m.name}`),
    ['role/maintenance-admin', 'cluster_maintenance_config/cluster-maintenance-config'],
  );
});

t.test("a role's rules grant exactly their verbs on their kinds", async (t) => {
  const rules = rulesOf(readManifests(ROLE).manifests[0]!.document);
  t.same(rules, [{ resources: ['cluster_maintenance_config'], verbs: ['create', 'read', 'update', 'delete'] }]);
  t.ok(rulesAllow(rules, 'update', 'cluster_maintenance_config'));
  t.ok(rulesAllow(rules, 'list', 'cluster_maintenance_config'), 'read also lists');
  t.notOk(rulesAllow(rules, 'read', 'role'), 'another kind');
  t.notOk(rulesAllow([{ resources: ['cluster_maintenance_config'], verbs: ['read'] }], 'update', 'cluster_maintenance_config'));
  t.ok(rulesAllow([{ resources: ['*'], verbs: ['*'] }], 'delete', 'user'), 'wildcards');
  t.notOk(rulesAllow([], 'read', 'cluster_maintenance_config'), 'no rule, no access');
});

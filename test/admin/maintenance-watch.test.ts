// The window each proxy serves: gate.yaml's key while the cluster store has none, the store's as
// soon as it has one (each proxy polls; no message has to reach it), gate.yaml's again once the
// resource is removed. Two GateProxy instances on one MemoryRouteStore, the schedule endpoint
// read over real TLS.
import t from 'tap';
import { get } from 'node:https';
import { readManifests } from '../../lib/admin/manifest.js';
import type { ResourceStore } from '../../lib/cluster/resource-store.js';
import { MAINTENANCE_SCHEDULE_PATH } from '../../lib/wire/names.js';
import { startClusterInProcess } from '../helpers/cluster.js';
import type { RunningGateProxy } from '../helpers/gate-proxy.js';
import { until } from '../helpers/net.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

function served(p: RunningGateProxy): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = get(
      { host: '127.0.0.1', port: p.port('multiplex'), path: MAINTENANCE_SCHEDULE_PATH, ca: p.ca, servername: 'localhost', agent: false },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
  });
}

t.test("gate.yaml's window until the store has one; the store's on every proxy after", async (t) => {
  const cluster = await startClusterInProcess(t);
  const withFile = await cluster.start({
    proxyService: { cluster_maintenance_config: { agent_upgrades: { utc_start_hour: 4, weekdays: ['Sat'] } } },
  });
  const without = await cluster.start();
  const store = cluster.store as unknown as ResourceStore;

  t.same(proxyParts(withFile.proxy).maintenanceSource, { from: 'config' }, "gate.yaml's key is the initial value");
  t.match((await served(withFile)).body, /utc_start_hour: 4/);
  t.same(proxyParts(without.proxy).maintenanceSource, { from: 'none' });
  t.equal((await served(without)).status, 404, 'no window anywhere: none served');

  const [manifest] = readManifests(
    'kind: cluster_maintenance_config\nspec: {agent_upgrades: {utc_start_hour: 9, weekdays: [Tue]}}\n',
  ).manifests;
  const stored = await store.putResource({ ...manifest!, updatedBy: 'test', updatedAt: Date.now() }, 'create');
  for (const p of [withFile, without]) {
    await until(() => proxyParts(p.proxy).maintenanceSource.from === 'store', 'the stored window in force');
    t.same(proxyParts(p.proxy).maintenanceSource, { from: 'store', revision: stored!.revision });
    t.match((await served(p)).body, /utc_start_hour: 9\n\s+weekdays: \[Tuesday\]/, 'served from the store');
  }

  await store.deleteResource(manifest!.kind, manifest!.name);
  await until(() => proxyParts(withFile.proxy).maintenanceSource.from === 'config', "back to gate.yaml's");
  t.match((await served(withFile)).body, /utc_start_hour: 4/);
  await until(() => proxyParts(without.proxy).maintenanceSource.from === 'none', 'none again');
});

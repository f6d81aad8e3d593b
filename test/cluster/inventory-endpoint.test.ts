// GET /v1/inventory on the diagnostics listener: the rows as JSON, a store that cannot be read
// as 503 with its code, 404 on a listener that serves no inventory, 405 for other methods.
import t, { type Test } from 'tap';
import { DiagServer } from '../../lib/cluster/diag-server.js';
import type { InventoryRow } from '../../lib/cluster/inventory.js';
import { GateMetrics } from '../../lib/cluster/metrics.js';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { run } from '../helpers/net.js';
import { httpGet } from '../helpers/prometheus.js';
import { GATE_MUX } from '../helpers/proxy-command.js';

const row: InventoryRow = {
  server_id: '0b7c6a1e-2f4d-4c3b-9a8e-1d2c3b4a5f60',
  hostname: 'db-1',
  services: [{ kind: 'db', name: 'orders' }],
  version: '0.1.0',
  upgrader: 'none',
  update_group: 'default',
  agent: 'db-1',
  proxies: ['p1'],
  since: new Date(0).toISOString(),
};

async function diag(t: Test, inventory?: () => Promise<InventoryRow[]>): Promise<number> {
  const server = await DiagServer.start({
    host: '127.0.0.1',
    port: 0,
    metrics: new GateMetrics(),
    readiness: () => [],
    ...(inventory ? { inventory } : {}),
  });
  t.teardown(() => server.close());
  return server.address.port;
}

t.test('the inventory endpoint', async (t) => {
  let failing = false;
  const port = await diag(t, async () => {
    if (failing) throw new GateError(ErrorCodes.STORE_UNAVAILABLE, 'route store redis://127.0.0.1:1/0: agentRecords: not connected');
    return [row];
  });
  const ok = await httpGet(port, '/v1/inventory');
  t.equal(ok.status, 200);
  t.equal(ok.contentType, 'application/json');
  t.same(JSON.parse(ok.body), [row]);
  t.equal((await httpGet(port, '/v1/inventory', 'POST')).status, 405);
  failing = true;
  const down = await httpGet(port, '/v1/inventory');
  t.equal(down.status, 503);
  t.match(JSON.parse(down.body), { code: ErrorCodes.STORE_UNAVAILABLE, error: /not connected/ });
  const cli = await run(process.execPath, [GATE_MUX, 'inventory', 'ls', '--diag', `127.0.0.1:${port}`]);
  t.equal(cli.code, 1, 'the command fails');
  t.match(
    cli.stderr,
    `gate-mux inventory: http://127.0.0.1:${port}/v1/inventory: 503 GATE_ERR_STORE_UNAVAILABLE: the inventory cannot be read`,
  );
  t.equal((await httpGet(await diag(t), '/v1/inventory')).status, 404, 'a listener without an inventory source');
});

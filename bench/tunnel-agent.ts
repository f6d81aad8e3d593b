// The bench's agent process: holds a reverse tunnel to the tunnel router (bench/tunnel-router.ts)
// and serves TARGET. Certificates come in the environment (PEM text) from the router that made them.
import { startAgent } from '../lib/index.js';

const env = process.env;
const agent = startAgent({
  proxy: env.PROXY ?? '',
  name: env.AGENT_NAME ?? 'bench-agent',
  cert: env.AGENT_CERT ?? '',
  key: env.AGENT_KEY ?? '',
  ca: env.AGENT_CA ?? '',
  serverName: 'localhost',
  env: {},
  resources: [env.TARGET ?? ''],
  // The listener's HTTPS certificate is from the same development CA as the tunnel's.
  ...(env.AGENT_UPGRADE === '1'
    ? { connectionUpgrade: { mode: true, loadBalancerCa: env.AGENT_CA ?? '' } }
    : { connectionUpgrade: { mode: false } }),
});
const stop = (): void => {
  void agent.close({ graceMs: 500 }).then(() => process.exit(0));
};
process.once('SIGTERM', stop);
// stdin is a pipe from the router (bench/tunnel-side.ts): its end means the router is gone.
process.stdin.once('close', stop);
process.stdin.resume();

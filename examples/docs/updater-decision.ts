import { fetchTargetVersion, fetchCritical, readSchedule, shouldUpgrade } from 'gate-mux/updater';
import { readFileSync } from 'node:fs';

// The proxy, and the cluster CA the agent got at its join (ca.pem in its state directory).
const proxy = process.env.GATE_PROXY ?? 'https://gate.example.com:443';
const request = { proxy, channel: 'stable/cloud', ca: readFileSync('ca.pem') };
const target = await fetchTargetVersion(request); // '1.2.4', or undefined for `none`
const critical = (await fetchCritical(request)) ?? false; // undefined: the proxy has no /critical
const { schedule, warning } = await readSchedule('/etc/gate-upgrade.d/schedule');
if (warning) console.error(`warning: ${warning}`);
const decision = shouldUpgrade({ current: '1.2.3', target, critical, window: schedule, now: new Date(), allowDowngrade: false });
// → { upgrade, available, downgrade, nextStart, …, reason: 'in-window' | 'outside-window' | 'critical'
//     | 'up-to-date' | 'downgrade-refused' | 'no-target' | 'no-schedule' }
console.log(`${decision.reason}: ${decision.upgrade ? `upgrade to ${target} now` : 'no upgrade now'}`);

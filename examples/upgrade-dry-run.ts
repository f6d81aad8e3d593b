// What the updater beside an agent would do now, without doing it: `gate-upgrade dry-run`
// (lib/cli/gate-upgrade.ts) under its old example name.
//
//   npm run build && node dist/examples/upgrade-dry-run.js --proxy https://gate.example.com:443 \
//       [--channel stable/cloud] [--ca ca.pem] [--current 1.2.3] [--schedule schedule.yaml]
import { main } from '../lib/cli/gate-upgrade.js';

process.exitCode = await main(['dry-run', ...process.argv.slice(2)]);

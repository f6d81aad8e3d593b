// The agent, as users run it: a thin wrapper around lib/cli/agent.ts (see its --help).
//
// First start (joins with the token and CA pin `npm start` prints; key and certificate kept in
// the state directory, mode 0600):
//   node dist/examples/agent.js --proxy localhost:3080 --ca-pin sha256:... --token-file .data/join-token \
//       --name local-agent --allow 127.0.0.1:5432 --state-dir .agent-local-agent
// Later starts need no token: node dist/examples/agent.js --proxy localhost:3080 --name local-agent \
//       --allow 127.0.0.1:5432 --state-dir .agent-local-agent
// A pre-issued identity: --name NAME --cert FILE --key FILE --ca FILE --allow HOST:PORT.
// Report the way to the proxy and exit: --proxy HOST:PORT --ca FILE.
// HTTPS_PROXY / NO_PROXY are honoured; SIGTERM closes the tunnel with a GOAWAY.
import { main } from '../lib/cli/agent.js';

process.exitCode = await main(process.argv.slice(2));

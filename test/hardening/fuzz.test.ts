/**
 * A bounded, seeded run of the fuzz loop that `npm run fuzz` runs a million times: the ClientHello
 * parser, the sniffers, the PROXY parser, the detection state machine and a framed tunnel session,
 * on mutated captures and frames.
 */
import t from 'tap';
import { fuzz } from '../fuzz/engine.js';

t.test('seeded fuzz of the parsers and the detector: no crash, no broken invariant, no slow input', async (t) => {
  const seed = 4242;
  // Generous per-input limit here: the tests share two cores with other suites (npm run fuzz uses 100 ms).
  const report = await fuzz({ inputs: 40_000, seed, slowMs: 1000 });
  t.same(report.failures.slice(0, 3), [], `seed ${seed}`);
  t.equal(report.inputs, 40_000);
  // The mutations must reach every verdict of every target, or the run proves little.
  t.ok(
    report.verdicts['client-hello'].done! > 0 && report.verdicts['client-hello'].error! > 0 && report.verdicts['client-hello'].need! > 0,
    JSON.stringify(report.verdicts['client-hello']),
  );
  t.ok(
    report.verdicts['proxy-header'].done! > 0 && report.verdicts['proxy-header'].error! > 0,
    JSON.stringify(report.verdicts['proxy-header']),
  );
  const detector = Object.keys(report.verdicts.detector);
  for (const protocol of ['done:tls', 'done:ssh', 'done:http1', 'done:postgres'])
    t.ok(detector.includes(protocol), `detector reached ${protocol}`);
  t.ok(
    detector.some((v) => v.startsWith('failed:')),
    'detector failures reached',
  );
  const frames = Object.keys(report.verdicts['tunnel-frames']);
  t.ok(frames.includes('done:open'), `framed sessions left open by valid input: ${JSON.stringify(report.verdicts['tunnel-frames'])}`);
  t.ok(
    ['closed:PROTOCOL_ERROR', 'closed:FRAME_SIZE_ERROR'].every((v) => frames.includes(v)),
    'framed sessions ended by malformed frames, each with its wire error',
  );
  t.ok(frames.includes('closed:ENHANCE_YOUR_CALM'), 'framed sessions ended by a limit on work (GATE_ERR_TUNNEL_FLOOD)');
  t.comment(`fuzz: ${report.inputs} inputs, ${report.inputsPerSecond}/s, slowest ${report.slowestMs} ms`);
});

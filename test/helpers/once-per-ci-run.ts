// Tests run once per CI run, not once per Node major. .ci/run runs the suite on the machine's Node
// first (with coverage), then .ci/test-nodes runs it again on the other majors with
// GATE_MUX_MACHINE_TESTS=done; a test whose cost is processes, not a Node-version-dependent path
// the other files leave uncovered on every major, skips there, saying why.

/** Why the test does not run again in this CI run (`why` says what covers it), or false. */
export function ranOnceThisCiRun(why: string): string | false {
  if (process.env.GATE_MUX_MACHINE_TESTS === 'done') return `ran once already in this CI run (GATE_MUX_MACHINE_TESTS=done): ${why}`;
  return false;
}

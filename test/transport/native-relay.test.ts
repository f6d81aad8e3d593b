import t from 'tap';
import { envSwitch, NATIVE_SPLICE_DEFAULT, NATIVE_SPLICE_ENV, nativeSpliceWanted } from '../../lib/transport/native-relay.js';

t.test('envSwitch reads on/off words in any case and nothing else', async (t) => {
  for (const on of ['1', 'on', 'TRUE', ' true ']) t.equal(envSwitch(on), true, on);
  for (const off of ['0', 'off', 'False']) t.equal(envSwitch(off), false, off);
  for (const unset of [undefined, '', 'yes', '2']) t.equal(envSwitch(unset), undefined, String(unset));
});

t.test('splice: the option wins, then GATE_MUX_NATIVE_SPLICE, then the measured default', async (t) => {
  t.equal(nativeSpliceWanted(false, { [NATIVE_SPLICE_ENV]: '1' }), false, 'option off over env on');
  t.equal(nativeSpliceWanted(true, { [NATIVE_SPLICE_ENV]: '0' }), true, 'option on over env off');
  t.equal(nativeSpliceWanted(undefined, { [NATIVE_SPLICE_ENV]: '0' }), false, 'env off');
  t.equal(nativeSpliceWanted(undefined, { [NATIVE_SPLICE_ENV]: 'on' }), true, 'env on');
  t.equal(nativeSpliceWanted(undefined, {}), NATIVE_SPLICE_DEFAULT, 'neither: the default');
  t.equal(NATIVE_SPLICE_DEFAULT, true, 'splice by default (BENCHMARKS.md: about half the CPU per GB)');
});

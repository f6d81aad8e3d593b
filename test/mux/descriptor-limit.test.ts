import t from 'tap';
import { readFileSync } from 'node:fs';
import {
  ASSUMED_OPEN_FILES,
  connectionCapFor,
  describeCap,
  descriptorCapFrom,
  processDescriptorCap,
  softOpenFilesLimit,
} from '../../lib/mux/descriptor-limit.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max processes             96365                96365                processes
Max open files            1024                 524288               files
Max locked memory         8388608              8388608              bytes
`;

t.test('the soft "Max open files" limit is read from /proc/<pid>/limits text', async (t) => {
  t.equal(softOpenFilesLimit(LIMITS), 1024, 'soft, not hard');
  t.equal(softOpenFilesLimit(LIMITS.replace('1024     ', 'unlimited')), undefined, 'unlimited: not derivable');
  t.equal(softOpenFilesLimit('Max cpu time unlimited unlimited seconds\n'), undefined, 'no line');
  t.equal(softOpenFilesLimit(''), undefined);
});

t.test('two descriptors per connection after a reserve of 64 + 1/16 of the limit', async (t) => {
  t.equal(connectionCapFor(256), 88, '(256 - 64 - 16) / 2');
  t.equal(connectionCapFor(1024), 448, '(1024 - 64 - 64) / 2');
  t.equal(connectionCapFor(524288), 245728, 'systemd LimitNOFILE of the example unit');
  t.equal(connectionCapFor(20), 1, 'never below one');
  for (const limit of [64, 100, 256, 1000, 4096, 65536]) {
    const cap = connectionCapFor(limit);
    t.ok(cap * 2 + 64 <= limit || cap === 1, `${limit}: ${cap} connections leave the reserve free`);
  }
});

t.test('descriptorCapFrom: from the limits text, or the assumed limit when there is none', async (t) => {
  t.same(descriptorCapFrom(LIMITS), { cap: 448, openFiles: 1024, source: 'proc' });
  t.same(descriptorCapFrom(undefined), { cap: connectionCapFor(ASSUMED_OPEN_FILES), openFiles: ASSUMED_OPEN_FILES, source: 'assumed' });
  t.match(describeCap(descriptorCapFrom(LIMITS)), '(open-file limit 1024 - 128 reserved) / 2');
  t.match(describeCap(descriptorCapFrom(undefined)), /unknown on this system, assumed 1024/);
});

t.test('this process: the cap follows its own open-file limit', async (t) => {
  const own = processDescriptorCap();
  let text: string | undefined;
  try {
    text = readFileSync('/proc/self/limits', 'utf8');
  } catch {
    text = undefined;
  }
  t.same(own, descriptorCapFrom(text));
  if (process.platform === 'linux') t.equal(own.source, 'proc');
});

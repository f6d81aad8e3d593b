// The reference moved from README.md into docs/: every relative link in README.md and docs/ must
// name a file that exists, so a page moved or renamed later cannot leave a dead link behind.
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { relativeLinks } from '../helpers/markdown.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const docs = readdirSync(resolve(root, 'docs'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.md'));

t.test('every relative link of README.md and docs/ names an existing file', async (t) => {
  let links = 0;
  for (const file of ['README.md', ...docs.map((f) => join('docs', f))]) {
    for (const link of relativeLinks(readFileSync(resolve(root, file), 'utf8'))) {
      links++;
      t.ok(existsSync(resolve(root, dirname(file), link)), `${file} → ${link}`);
    }
  }
  t.ok(links > 30, `${links} links checked`);
});

t.test('the link reader takes relative targets and leaves URLs and anchors alone', async (t) => {
  t.same(relativeLinks('[a](docs/x.md) [b](https://e.test/) [c](#top) [d](../y.md#part) `[e](z.md)`'), ['docs/x.md', '../y.md']);
});

import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import { commandWithVersion, splitCommandLine } from '../../lib/updater/command-line.js';

t.test('words as sh splits them, quotes and backslashes, nothing else special', async (t) => {
  t.same(splitCommandLine('apt-get install -y gate-mux={version}'), ['apt-get', 'install', '-y', 'gate-mux={version}']);
  t.same(splitCommandLine('  a  \'b c\'  "d \\"e\\" \\\\ f"  g\\ h\t'), ['a', 'b c', 'd "e" \\ f', 'g h']);
  t.same(splitCommandLine("x'y'\"z\" ''"), ['xyz', ''], 'adjacent quoted parts join; an empty quoted word stays');
  t.same(
    splitCommandLine('echo $HOME; rm -rf / | cat > f'),
    ['echo', '$HOME;', 'rm', '-rf', '/', '|', 'cat', '>', 'f'],
    'no shell syntax: plain words',
  );
  t.same(splitCommandLine("'it''s'"), ['its']);
});

t.test('mistakes are refused', async (t) => {
  t.throws(() => splitCommandLine("apt-get install 'gate"), { code: ErrorCodes.INVALID_ARGUMENT, message: /unterminated '/ });
  t.throws(() => splitCommandLine('say "hi'), { code: ErrorCodes.INVALID_ARGUMENT, message: /unterminated "/ });
  t.throws(() => splitCommandLine('   '), { code: ErrorCodes.INVALID_ARGUMENT, message: /empty command/ });
});

t.test('{version} is substituted after splitting, in every word, never re-split', async (t) => {
  t.same(commandWithVersion("dnf install 'gate-mux-{version}' --comment={version}", '1.2.4'), [
    'dnf',
    'install',
    'gate-mux-1.2.4',
    '--comment=1.2.4',
  ]);
  t.same(commandWithVersion('x {version}', 'a b;c'), ['x', 'a b;c'], 'a value with blanks stays one word');
});

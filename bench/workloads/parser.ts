// Parser: ClientHellos parsed and detected per second on the router core (bench/parser.ts), no
// sockets; the rows of every round are kept for the report's medians.
import { join } from 'node:path';
import type { BenchSession, ParserRow } from '../session.js';
import { JsonLines, spawnPinned, stopChild } from '../spawn.js';
import { fmt } from '../stats.js';

export async function parser(s: BenchSession): Promise<void> {
  for (let round = 1; round <= s.config.rounds; round++) {
    const child = spawnPinned(process.execPath, [join(s.distDir, 'bench', 'parser.js')], {
      cpus: s.routerCpus,
      env: { DURATION_MS: String(s.config.parserMs) },
      log: join(s.dir, 'parser.log'),
      stdout: 'pipe',
    });
    try {
      const rows = await new JsonLines(child).next<ParserRow[]>(60_000);
      s.parser.runs.push(rows);
      s.log(`parser r${round}: ${rows.map((r) => `${r.name} ${fmt(r.parsesPerSecond)}/s`).join(', ')}`);
    } catch (err) {
      s.parser.error = `${(err as Error).message} (see ${join(s.dir, 'parser.log')})`;
      s.log(`parser: ${s.parser.error}`);
      return;
    } finally {
      await stopChild(child);
    }
  }
}

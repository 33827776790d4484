// events.jsonl: one event per line with a per-run seq (DESIGN §3), appended with O_APPEND so lines never interleave.
import { readFileSync, existsSync } from 'node:fs';
import { eventsPath } from './paths.ts';
import { appendNoFollow, assertPlainDir } from './safe-fs.ts';

/** Opens the log; seq continues from the last line on disk so resumes and verifies never reuse a seq. */
export function openEventLog(
  dir: string, onAppend?: () => void,
): { append(kind: string, data?: Record<string, unknown>): void } {
  const path = eventsPath(dir);
  let seq = 0;
  for (const line of existsSync(path) ? readFileSync(path, 'utf8').split('\n') : []) {
    try {
      seq = Math.max(seq, (JSON.parse(line) as { seq: number }).seq);
    } catch {
      // A blank line, or a torn last line from a killed writer, is skipped, not fatal.
    }
  }
  return {
    append(kind, data = {}) {
      seq += 1;
      const event = { seq, ts: new Date().toISOString(), kind, data };
      // Never through a symbolic link: a planted events.jsonl -> ~/.bashrc must not get our lines appended.
      assertPlainDir(dir);
      appendNoFollow(path, JSON.stringify(event) + '\n');
      onAppend?.();
    },
  };
}

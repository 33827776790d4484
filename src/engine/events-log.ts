// events.jsonl: one event per line with a per-run seq (DESIGN §3), appended with O_APPEND so lines never interleave.
import { readFileSync, existsSync } from 'node:fs';
import { eventsPath } from './paths.ts';
import { appendNoFollow, assertPlainDir } from './safe-fs.ts';

export interface RunEvent {
  seq: number;
  ts: string;
  kind: string;
  data: Record<string, unknown>;
}

export function readEvents(dir: string): RunEvent[] {
  const path = eventsPath(dir);
  if (!existsSync(path)) return [];
  const out: RunEvent[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as RunEvent);
    } catch {
      // A torn last line from a killed writer is skipped, not fatal.
    }
  }
  return out;
}

/** Opens the log; seq continues from the last line on disk so resumes and verifies never reuse a seq. */
export function openEventLog(
  dir: string, onAppend?: () => void,
): { append(kind: string, data?: Record<string, unknown>): void } {
  let seq = readEvents(dir).reduce((max, e) => Math.max(max, e.seq), 0);
  return {
    append(kind, data = {}) {
      seq += 1;
      const event: RunEvent = { seq, ts: new Date().toISOString(), kind, data };
      // Never through a symbolic link: a planted events.jsonl -> ~/.bashrc must not get our lines appended.
      assertPlainDir(dir);
      appendNoFollow(eventsPath(dir), JSON.stringify(event) + '\n');
      onAppend?.();
    },
  };
}

// The answer file a blocked run waits for: $SVC_CONTROL_ANSWER_DIR/<source>/<run>.json, written on the run's own
// machine by the Control Plane that launched it or by `svc answer` (docs/architecture.md, "Channels").
import { existsSync, readFileSync, renameSync, mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { writeJsonAtomic } from './safe-fs.ts';
import { answerFilePath } from './paths.ts';

export const MAX_ANSWER_BYTES = 64 * 1024;

export function writeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, answer: string): string {
  const path = answerFilePath(env, source, run);
  writeJsonAtomic(path, { answer, at: new Date().toISOString() }, 0o600);
  return path;
}

/** Takes the answer if one is waiting: moves it into the run folder (`answers/`) so it is used exactly once. */
export function takeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, keepDir: string): string | null {
  const path = answerFilePath(env, source, run);
  if (!existsSync(path)) return null;
  // Unique per take: two answers within one millisecond must not overwrite each other's record.
  const kept = join(keepDir, 'answers', `${Date.now()}-${randomBytes(4).toString('hex')}.json`);
  try {
    mkdirSync(dirname(kept), { recursive: true });
    renameSync(path, kept);
    const value = JSON.parse(readFileSync(kept, 'utf8')) as { answer?: unknown };
    return typeof value.answer === 'string' ? value.answer.slice(0, MAX_ANSWER_BYTES) : null;
  } catch {
    return null;
  }
}

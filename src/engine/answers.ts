// Answers and stop requests for runs, as files under $SVC_CONTROL_ANSWER_DIR/<source>/ (shared by every runner on the
// machine).
import { readFileSync, renameSync, existsSync, mkdirSync, rmSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { writeJsonAtomic } from './atomic.ts';
import { answerFilePath } from './paths.ts';

export const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * Written by the Control Plane's answer route, `svc answer`, or a runner relaying an ingest control item. The Control
 * Plane may deliver one answer both ways (its own file and a control item); both copies carry the same `answerId`.
 */
export function writeAnswer(
  env: NodeJS.ProcessEnv, source: string, run: string, answer: string, answerId?: string,
): string {
  const path = answerFilePath(env, source, run);
  writeJsonAtomic(path, { answer, at: new Date().toISOString(), ...(answerId ? { answer_id: answerId } : {}) }, 0o600);
  return path;
}

function readAnswerFile(path: string): { answer?: unknown; answer_id?: unknown } | null {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as { answer?: unknown; answer_id?: unknown };
  } catch {
    return null;
  }
}

/** Whether the run (its folder is `keepDir`) already used the answer with this id. */
export function answerAlreadyTaken(keepDir: string, answerId: string, except?: string): boolean {
  const dir = join(keepDir, 'answers');
  if (!existsSync(dir)) return false;
  return readdirSync(dir).some((name) => {
    const path = join(dir, name);
    return path !== except && readAnswerFile(path)?.answer_id === answerId;
  });
}

/**
 * Takes the answer if one is waiting: moves it into the run folder so it is used exactly once (a second copy is
 * dropped).
 */
export function takeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, keepDir: string): string | null {
  const path = answerFilePath(env, source, run);
  if (!existsSync(path)) return null;
  // Unique per take: two answers within one millisecond must not overwrite each other's record.
  const kept = join(keepDir, 'answers', `${Date.now()}-${randomBytes(4).toString('hex')}.json`);
  mkdirSync(dirname(kept), { recursive: true });
  try {
    renameSync(path, kept);
  } catch {
    return null;
  }
  const value = readAnswerFile(kept);
  if (typeof value?.answer_id === 'string' && answerAlreadyTaken(keepDir, value.answer_id, kept)) {
    rmSync(kept, { force: true });
    return null;
  }
  return typeof value?.answer === 'string' ? value.answer.slice(0, MAX_ANSWER_BYTES) : null;
}

function stopMarker(env: NodeJS.ProcessEnv, source: string, run: string): string {
  return answerFilePath(env, source, run).replace(/\.json$/, '.stop');
}

export function requestStopFile(env: NodeJS.ProcessEnv, source: string, run: string): void {
  writeJsonAtomic(stopMarker(env, source, run), { at: new Date().toISOString() }, 0o600);
}

export function takeStopRequest(env: NodeJS.ProcessEnv, source: string, run: string): boolean {
  const path = stopMarker(env, source, run);
  if (!existsSync(path)) return false;
  rmSync(path, { force: true });
  return true;
}

// Answers and stop requests for runs, as files under $SVC_CONTROL_ANSWER_DIR/<source>/ (shared by every runner on the machine).
import { readFileSync, renameSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { writeJsonAtomic } from './atomic.ts';
import { answerFilePath } from './paths.ts';

export const MAX_ANSWER_BYTES = 64 * 1024;

/** Written by the Control Plane's answer route, `svc answer`, or a runner relaying an ingest control item. */
export function writeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, answer: string): string {
  const path = answerFilePath(env, source, run);
  writeJsonAtomic(path, { answer, at: new Date().toISOString() }, 0o600);
  return path;
}

/** Takes the answer if one is waiting: moves it into the run folder so it is used exactly once. */
export function takeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, keepDir: string): string | null {
  const path = answerFilePath(env, source, run);
  if (!existsSync(path)) return null;
  const kept = join(keepDir, 'answers', `${Date.now()}.json`);
  mkdirSync(dirname(kept), { recursive: true });
  try {
    renameSync(path, kept);
  } catch {
    return null;
  }
  try {
    const value = JSON.parse(readFileSync(kept, 'utf8')) as { answer?: unknown };
    return typeof value.answer === 'string' ? value.answer.slice(0, MAX_ANSWER_BYTES) : null;
  } catch {
    return null;
  }
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

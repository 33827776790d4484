// The answer file a blocked run waits for, and who may answer what (docs/architecture.md, "Channels").
import { existsSync, readFileSync, renameSync, mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { writeJsonAtomic } from './safe-fs.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { obj, str, tryParseJson } from '../untrusted.ts';

export const MAX_ANSWER_BYTES = 64 * 1024;

/** `by`: `cli`, `control:<actor>` or `origin:<route>:<who>` (docs/engine.md "Who may answer what"). */
export interface Answer {
  text: string;
  by: string;
}

export function isOperatorAnswer(by: string): boolean {
  return by === 'cli' || by.startsWith('control:');
}

/** Who an origin's answer names (`webhook:octocat`, after `origin:`): one short line, never a control character. */
export function isOriginName(value: string): boolean {
  return /^[^\p{Cc}]{1,200}$/u.test(value);
}

/**
 * Why `svc answer --origin` did not answer, as the one line it prints on stdout (`origin-refusal: not_blocked`), and
 * the fixed text the trigger server tells the origin for each: its stderr may name the Control Plane's address, which
 * is never put in a message (docs/trigger.md), so it goes to the server's log only.
 */
export const ORIGIN_REFUSALS = {
  not_blocked: 'the run is not blocked: it waits for no answer',
  unknown_run: 'neither the job\'s checkout nor the Control Plane knows the run',
  unreachable: 'the run is not in the job\'s checkout and the Control Plane could not be reached',
  failed: 'svc answer failed (the trigger server\'s log says why)',
} as const;
export type OriginRefusal = keyof typeof ORIGIN_REFUSALS;
export const ORIGIN_REFUSAL_LINE = 'origin-refusal: ';

/** Where answers wait, as `<source>/<run>.json`: `$SVC_CONTROL_ANSWER_DIR`, default ~/.svc/control/answers. */
export function answerDirOf(env: NodeJS.ProcessEnv): string {
  return env.SVC_CONTROL_ANSWER_DIR || join(svcHomeOf(env), 'control', 'answers');
}

export function answerFilePath(dir: string, source: string, run: string): string {
  return join(dir, source, `${run}.json`);
}

export function writeAnswer(dir: string, source: string, run: string, answer: string, by: string): string {
  const path = answerFilePath(dir, source, run);
  writeJsonAtomic(path, { answer, by, at: new Date().toISOString() }, 0o600);
  return path;
}

/** Takes the answer if one is waiting: moves it into the run folder (`answers/`) so it is used exactly once. */
export function takeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, keepDir: string): Answer | null {
  const path = answerFilePath(answerDirOf(env), source, run);
  if (!existsSync(path)) return null;
  // Unique per take: two answers within one millisecond must not overwrite each other's record.
  const kept = join(keepDir, 'answers', `${Date.now()}-${randomBytes(4).toString('hex')}.json`);
  try {
    mkdirSync(dirname(kept), { recursive: true });
    renameSync(path, kept);
    const value = obj(tryParseJson(readFileSync(kept, 'utf8')));
    return typeof value.answer === 'string' ? answerOf(value.answer, value.by) : null;
  } catch {
    return null;
  }
}

/** An answer as a record carries it (file or ingest item), capped; one naming no one (`unknown`) is no operator's. */
export function answerOf(text: string, by: unknown): Answer {
  return { text: text.slice(0, MAX_ANSWER_BYTES), by: str(by)?.slice(0, 300) ?? 'unknown' };
}

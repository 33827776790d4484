// The answer file a blocked run waits for, and who may answer what (docs/architecture.md, "Channels").
import { existsSync, readFileSync, renameSync, mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { writeJsonAtomic } from './safe-fs.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';

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

/** `$SVC_CONTROL_ANSWER_DIR/<source>/<run>.json`, default ~/.svc/control/answers (DESIGN §4). */
function answerFilePath(env: NodeJS.ProcessEnv, source: string, run: string): string {
  const base = env.SVC_CONTROL_ANSWER_DIR || join(svcHomeOf(env), 'control', 'answers');
  return join(base, source, `${run}.json`);
}

export function writeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, answer: string, by: string): string {
  const path = answerFilePath(env, source, run);
  writeJsonAtomic(path, { answer, by, at: new Date().toISOString() }, 0o600);
  return path;
}

/** Takes the answer if one is waiting: moves it into the run folder (`answers/`) so it is used exactly once. */
export function takeAnswer(env: NodeJS.ProcessEnv, source: string, run: string, keepDir: string): Answer | null {
  const path = answerFilePath(env, source, run);
  if (!existsSync(path)) return null;
  // Unique per take: two answers within one millisecond must not overwrite each other's record.
  const kept = join(keepDir, 'answers', `${Date.now()}-${randomBytes(4).toString('hex')}.json`);
  try {
    mkdirSync(dirname(kept), { recursive: true });
    renameSync(path, kept);
    const value = JSON.parse(readFileSync(kept, 'utf8')) as { answer?: unknown; by?: unknown };
    return typeof value.answer === 'string' ? answerOf(value.answer, value.by) : null;
  } catch {
    return null;
  }
}

/** An answer as a record carries it (file or ingest item), capped; one naming no one (`unknown`) is no operator's. */
export function answerOf(text: string, by: unknown): Answer {
  const who = typeof by === 'string' && by !== '' ? by.slice(0, 300) : 'unknown';
  return { text: text.slice(0, MAX_ANSWER_BYTES), by: who };
}

/** An answer to the budget question (docs/engine.md "Blocked runs and the budget"): a new budget in dollars ("raise to
 * $1", "raise it to 2.50", "$5", "5"), "yes" for another step of the same size, or anything else: stop. */
export function readBudgetAnswer(answer: string): { raiseTo: number } | 'more' | 'stop' {
  const words = /^\s*(?:(?:raise|increase|set)\s+(?:it\s+|the\s+budget\s+)?to\s+)?/.source;
  const amount = new RegExp(`${words}\\$?\\s*(\\d{1,9}(?:\\.\\d{1,6})?)\\s*\\$?\\s*$`, 'i').exec(answer);
  if (amount) return { raiseTo: Number(amount[1]) };
  return /^\s*(y|yes|continue|ok)\b/i.test(answer) ? 'more' : 'stop';
}

// A plan's mark: an HMAC-SHA256, with a key only svc on this host holds (~/.svc/keys, never in a sandbox's view), over
// plan.json's exact bytes and where the run works. An agent writes files as the person, so no owner check tells a
// plan svc wrote from one it planted (docs/engine.md "The run's plan"); only the mark does. Never shown to anyone.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { writeFileAtomic } from '../atomic-write.ts';
import { FailedError } from '../errors.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { realOrNull } from '../spawn/tree.ts';
import { projectOf } from './paths.ts';

export const PLAN_MARK_FILE = 'plan.mark';
const MARK_BYTES = 32;
const KEY_BYTES = 32;

/**
 * The key that marks plans, `~/.svc/keys/plan-hmac.key` (keys.ts's folder, not imported: a plain start loads no key
 * module), made on first use, 0600 in a 0700 folder. Of two processes that make it at once, the first one linked in
 * is the key every mark is checked with.
 */
function planKey(env: NodeJS.ProcessEnv): Buffer {
  const dir = join(svcHomeOf(env), 'keys');
  const path = join(dir, 'plan-hmac.key');
  if (!existsSync(path)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const made = `${path}.${process.pid}.new`;
    try {
      writeFileAtomic(made, randomBytes(KEY_BYTES), 0o600);
      // link(2) never replaces a key already there.
      linkSync(made, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      rmSync(made, { force: true });
    }
  }
  const key = readFileSync(path);
  if (key.length !== KEY_BYTES) throw new FailedError(`svc's plan key ${path} is not ${KEY_BYTES} bytes`);
  return key;
}

/**
 * The mark of `plan` (plan.json's bytes) for the run folder `dir`: bound to the project's real path, the run's id and
 * whether it works in a worktree, which together say where its agent works (paths.ts runTree), so a plan copied into
 * another folder, or a state.json that moves the run, is not marked.
 */
export function planMark(env: NodeJS.ProcessEnv, dir: string, worktree: boolean, plan: Buffer): Buffer {
  const project = projectOf(dir);
  const where = JSON.stringify([realOrNull(project) ?? project, basename(dir), worktree]);
  return createHmac('sha256', planKey(env)).update(where).update('\0').update(plan).digest();
}

/** Whether `mark` (the file's bytes, hex) is the plan's, compared in constant time once its length is right. */
export function isPlanMark(env: NodeJS.ProcessEnv, dir: string, worktree: boolean, plan: Buffer, mark: Buffer) {
  const text = mark.toString('utf8').trim();
  if (!/^[0-9a-f]+$/.test(text) || text.length !== MARK_BYTES * 2) return false;
  return timingSafeEqual(Buffer.from(text, 'hex'), planMark(env, dir, worktree, plan));
}

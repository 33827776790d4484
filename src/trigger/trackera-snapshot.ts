// The verified trackera payload a job's run reads instead of calling the tracker API (no key in the child, DESIGN §5).
// Each delivery's bytes are staged before its job is queued and put in place only once the job is committed:
// `<repo>/.svc/inbox/trackera/jobs/<job id>.json` is exactly the delivery that job came from (the run finds it through
// SVC_JOB_ID), and `<identifier>.json` is the newest accepted delivery for the issue. A refused or duplicate delivery
// leaves neither behind. Staged files have unique names, so concurrent deliveries for one issue never share one.
import { renameSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

export const TRACKERA_IDENTIFIER = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const JOB_FILE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export interface StagedSnapshot {
  /** Puts the payload in place for this job (synchronous: done before the job loop can launch the job). */
  keep(jobId: string): void;
  /** Removes whatever keep() did not use; safe to call after keep(). */
  discard(): Promise<void>;
}

export function trackeraInbox(repoDir: string): string {
  return join(repoDir, '.svc', 'inbox', 'trackera');
}

export async function stageTrackeraSnapshot(repoDir: string, identifier: string, raw: Buffer): Promise<StagedSnapshot> {
  if (!TRACKERA_IDENTIFIER.test(identifier)) throw new RangeError('bad trackera identifier');
  const dir = trackeraInbox(repoDir);
  await mkdir(join(dir, 'jobs'), { recursive: true, mode: 0o700 });
  const latestTmp = join(dir, `.${randomUUID()}.tmp`);
  const jobTmp = join(dir, 'jobs', `.${randomUUID()}.tmp`);
  const staged = [latestTmp, jobTmp];
  try {
    await Promise.all(staged.map((path) => writeFile(path, raw, { mode: 0o600 })));
  } catch (err) {
    await Promise.all(staged.map((path) => rm(path, { force: true })));
    throw err;
  }
  return {
    keep(jobId) {
      if (!JOB_FILE.test(jobId)) throw new RangeError('bad job id');
      renameSync(jobTmp, join(dir, 'jobs', `${jobId}.json`));
      staged.splice(staged.indexOf(jobTmp), 1);
      renameSync(latestTmp, join(dir, `${identifier}.json`));
      staged.splice(staged.indexOf(latestTmp), 1);
    },
    async discard() {
      await Promise.all(staged.splice(0).map((path) => rm(path, { force: true })));
    },
  };
}

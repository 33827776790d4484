// `svc start trackera:<id>` from the trigger server reads the payload of its own delivery (issue 11 item 3).
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trackeraSpec } from '../../src/engine/spec.ts';

function issue(title: string): string {
  return JSON.stringify({ type: 'Issue', action: 'update', data: { identifier: 'LIN-34', title, description: `about ${title}` } });
}

describe('trackera snapshots', () => {
  const repo = mkdtempSync(join(tmpdir(), 'svc-trackera-'));
  after(() => rmSync(repo, { recursive: true, force: true }));
  const inbox = join(repo, '.svc', 'inbox', 'trackera');
  mkdirSync(join(inbox, 'jobs'), { recursive: true });
  writeFileSync(join(inbox, 'LIN-34.json'), issue('newest delivery'));
  writeFileSync(join(inbox, 'jobs', 'j01jd0000000000000000000001.json'), issue('the job delivery'));

  it('reads the delivery of its own job (SVC_JOB_ID) and removes it once read', async () => {
    const task = await trackeraSpec(repo, 'LIN-34', { SVC_JOB_ID: 'j01jd0000000000000000000001' });
    assert.match(task.brief, /the job delivery/);
    assert.equal(existsSync(join(inbox, 'jobs', 'j01jd0000000000000000000001.json')), false);
  });

  it('falls back to the newest delivery without a job snapshot, and never reads a path from SVC_JOB_ID', async () => {
    for (const env of [{}, { SVC_JOB_ID: 'j01jd0000000000000000000009' }, { SVC_JOB_ID: '../LIN-34' }]) {
      const task = await trackeraSpec(repo, 'LIN-34', env);
      assert.match(task.brief, /newest delivery/, JSON.stringify(env));
    }
    assert.equal(existsSync(join(inbox, 'LIN-34.json')), true);
  });
});

// A delivery whose commit the database refuses for now (another process holds its write lock) or for want of space
// is answered 503 unavailable with Retry-After, as the Control Plane answers, never 500: nothing of it was kept, and
// the same delivery is queued once the database takes writes again.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { SECRETS, post, startTestTrigger, type TestTrigger } from './helpers.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

describe('a delivery the database cannot commit', () => {
  let t: TestTrigger;
  let other: DatabaseSync;
  after(async () => {
    if (other?.isTransaction) other.exec('ROLLBACK');
    other?.close();
    await t?.cleanup();
  });

  it('is answered 503 with Retry-After while another process holds the write lock, and queued after', async () => {
    t = await startTestTrigger();
    other = new DatabaseSync(t.settings.dbPath);
    const jobs = () => (other.prepare('SELECT count(*) AS n FROM jobs').get() as { n: number }).n;
    other.exec('BEGIN IMMEDIATE');
    const refused = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'while locked' }), bearer);
    other.exec('COMMIT');
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal((refused.body as { error: { code: string } }).error.code, 'unavailable');
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(jobs(), 0, 'nothing of the refused delivery was kept');
    const accepted = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'while locked' }), bearer);
    assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
    assert.equal(jobs(), 1);
  });
});

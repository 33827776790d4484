// Notification rows as runners of different sources report them through POST /v1/ingest: each source updates only the
// rows it reported (src/db/notifications-store.ts), so one runner's token cannot rewrite another's delivery record.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

const MAIN = 'main-token-0123456789abcdefghijkl';
const K8S = 'k8s-runner-token-0123456789abcdef';
const CI = 'ci-runner-token-0123456789abcdefgh';
const T0 = '2026-02-01T10:00:00.000Z';
const T1 = '2026-02-01T10:04:00.000Z';
const T2 = '2026-02-01T10:05:00.000Z';

interface Row {
  job_id: string; reported_by: string | null; source: string | null; origin: string; target: string; status: string;
  error: string;
}

function notification(job_id: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    job_id, origin: 'chata', channel: 'reply', target: 'https://hooks.chata.example/x', status: 'sent', attempts: 1,
    created_at: T0, updated_at: T0, ...over,
  };
}

describe('POST /v1/ingest notifications across runner sources', () => {
  let cp: TestControl;
  before(async () => {
    const runnerTokens = [{ source: 'k8s', token: K8S }, { source: 'ci', token: CI }];
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens } });
  });
  after(() => cp.close());

  async function rowsOf(job: string): Promise<Row[]> {
    const list = await cp.request('GET', '/v1/notifications', { token: MAIN });
    assert.equal(list.status, 200, list.text);
    return (list.json.items as Row[]).filter((n) => n.job_id === job);
  }

  it('keeps a runner\'s rows, of a run or a job alone, when another source reports the same job ids', async () => {
    const k8s = {
      source: 'k8s',
      runs: [{ run: 'r1', status: 'running', started_at: T0 }],
      notifications: [notification('jrun', { run: 'r1' }), notification('jalone')],
    };
    const shipped = await cp.request('POST', '/v1/ingest', { token: K8S, body: k8s });
    assert.equal(shipped.status, 200, shipped.text);
    assert.equal(shipped.json.notifications, 2);
    const forged = {
      origin: 'evil', target: 'https://evil.example/', status: 'failed', error: 'forged', updated_at: T1,
    };
    const ci = { source: 'ci', notifications: [notification('jrun', forged), notification('jalone', forged)] };
    const res = await cp.request('POST', '/v1/ingest', { token: CI, body: ci });
    assert.equal(res.status, 200, res.text);

    for (const job of ['jrun', 'jalone']) {
      const rows = await rowsOf(job);
      assert.equal(rows.length, 2, job);
      const kept = rows.find((n) => n.origin === 'chata')!;
      const expected = [job === 'jrun' ? 'k8s' : null, 'sent', 'hooks.chata.example'];
      assert.deepEqual([kept.source, kept.status, kept.target], expected);
      assert.equal(rows.find((n) => n.origin === 'evil')!.error, 'forged');
    }
  });

  it('names the source that reported each row, a job alone\'s too, whatever origin the row claims', async () => {
    const forged = notification('jtrigger', { origin: 'chata', target: 'https://hooks.chata.example/y' });
    const res = await cp.request('POST', '/v1/ingest', { token: CI, body: { source: 'ci', notifications: [forged] } });
    assert.equal(res.status, 200, res.text);
    const [row] = await rowsOf('jtrigger');
    assert.deepEqual([row!.reported_by, row!.source, row!.origin], ['ci', null, 'chata']);
    const alone = await rowsOf('jalone');
    assert.deepEqual(alone.map((n) => `${n.reported_by}:${n.origin}`).sort(), ['ci:evil', 'k8s:chata']);
  });

  it('still updates a row in place when the source that reported it reports progress', async () => {
    const progress = notification('jalone', { status: 'failed', attempts: 3, updated_at: T2 });
    const later = { source: 'k8s', notifications: [progress] };
    const res = await cp.request('POST', '/v1/ingest', { token: K8S, body: later });
    assert.equal(res.status, 200, res.text);
    const rows = await rowsOf('jalone');
    assert.equal(rows.length, 2);
    assert.equal(rows.find((n) => n.origin === 'chata')!.status, 'failed');
  });
});

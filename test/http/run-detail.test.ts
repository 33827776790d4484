// What run detail adds for the UI: the pending answer of a blocked run (until its runner collects it and moves on),
// the attempts of its retry group (its own source's only), why each action would be refused, whether its receipt.json
// is signed by a known key; and the list's source filter.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import { issueReceipt, RECEIPT_TYPE, type ReceiptBody } from '../../src/engine/receipt.ts';
import { hasSigningKey, keyIdOf, loadOrCreateSigningKey } from '../../src/keys.ts';

describe('GET /v1/runs/:source/:run detail fields', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
  });
  after(() => cp.close());

  it('shows an answer to another machine\'s run as pending until its runner collects it and moves on', async () => {
    const now = Date.now();
    cp.deps.stores.runs.upsert('far', { run: 'rq1', status: 'blocked', started_at: now, question: 'Which port?' });
    cp.deps.stores.events.insert({ source: 'far', run: 'rq1', seq: 1, ts: now, kind: 'question', data: '{"question":"Which port?"}' });
    assert.equal((await cp.request('GET', '/v1/runs/far/rq1')).json.pending_answer, null);

    assert.equal((await cp.request('POST', '/v1/runs/far/rq1/answer', { body: { answer: 'port 8080' } })).status, 202);
    const waiting = (await cp.request('GET', '/v1/runs/far/rq1')).json;
    assert.equal(waiting.status, 'blocked');
    assert.equal(waiting.pending_answer.answer, 'port 8080');
    assert.equal(waiting.pending_answer.via, 'ingest');
    assert.equal(waiting.pending_answer.delivered_at, null);
    assert.match(waiting.pending_answer.answered_at, /^\d{4}-\d\d-\d\dT/);

    // The runner checks in: its ingest response carries the answer, which is now delivered but not yet applied.
    const checkIn = { run: 'rq1', status: 'blocked', started_at: new Date(now).toISOString(), updated_at: new Date(now).toISOString() };
    const ingest = await cp.request('POST', '/v1/ingest', { body: { source: 'far', runs: [checkIn], events: [], artifacts: [] } });
    assert.deepEqual(ingest.json.control.map((c: { action: string }) => c.action), ['answer']);
    const delivered = (await cp.request('GET', '/v1/runs/far/rq1')).json;
    assert.match(delivered.pending_answer.delivered_at, /^\d{4}-\d\d-\d\dT/);

    // A new question after the answer: the old answer no longer waits.
    cp.deps.stores.events.insert({ source: 'far', run: 'rq1', seq: 2, ts: now + 5, kind: 'question', data: '{"question":"And the host?"}' });
    assert.equal((await cp.request('GET', '/v1/runs/far/rq1')).json.pending_answer, null);
    // The run continues: nothing pending either.
    cp.deps.stores.runs.setStatus('far', 'rq1', 'running', now + 10);
    assert.equal((await cp.request('GET', '/v1/runs/far/rq1')).json.pending_answer, null);
  });

  it('lists the attempts of the run\'s group oldest first', async () => {
    cp.deps.stores.runs.upsert('local', makeRun(10, { group_id: 'r000010', status: 'failed' }));
    cp.deps.stores.runs.upsert('local', makeRun(11, { group_id: 'r000010', status: 'failed' }));
    cp.deps.stores.runs.upsert('local', makeRun(12, { group_id: 'r000010', status: 'succeeded' }));
    cp.deps.stores.runs.upsert('local', makeRun(13, { group_id: 'r000013' }));
    const detail = (await cp.request('GET', '/v1/runs/local/r000011')).json;
    assert.deepEqual(detail.attempts.map((a: { run: string }) => a.run), ['r000010', 'r000011', 'r000012']);
    assert.deepEqual(Object.keys(detail.attempts[0]).sort(), ['run', 'source', 'started_at', 'status', 'verdict']);
    assert.deepEqual((await cp.request('GET', '/v1/runs/local/r000013')).json.attempts.map((a: { run: string }) => a.run), ['r000013']);
  });

  it('gives each action\'s refusal with the exact message the action answers', async () => {
    cp.deps.stores.runs.upsert('far', { run: 'rf1', status: 'failed', started_at: Date.now() });
    const detail = (await cp.request('GET', '/v1/runs/far/rf1')).json;
    assert.equal(detail.refusals.delete, null);
    assert.match(detail.refusals.stop, /it is failed/);
    for (const action of ['resume', 'retry', 'verify', 'stop', 'answer'] as const) {
      const reason = detail.refusals[action];
      if (action !== 'stop' && action !== 'answer') assert.match(reason, /belongs to another source/);
      const res = await cp.request('POST', `/v1/runs/far/rf1/${action}`, { body: action === 'answer' ? { answer: 'x' } : {} });
      assert.equal(res.status, 409, action);
      assert.equal(res.json.error.code, 'invalid_transition');
      assert.equal(res.json.error.message, reason, action);
    }
    // A run of this source the server did not start: its repository is unknown.
    cp.deps.stores.runs.upsert('local', makeRun(20, { status: 'stopped' }));
    const local = (await cp.request('GET', '/v1/runs/local/r000020')).json;
    assert.match(local.refusals.resume, /repository is unknown/);
    assert.equal(local.refusals.delete, null);
    cp.deps.stores.runs.upsert('local', makeRun(21, { status: 'running' }));
    const active = (await cp.request('GET', '/v1/runs/local/r000021')).json;
    assert.equal(active.refusals.stop, null);
    const del = await cp.request('DELETE', '/v1/runs/local/r000021');
    assert.equal(del.json.error.message, active.refusals.delete);
  });

  // Whoever shipped the run wrote its receipt.json (a pod's run container, where the agent runs, can): only one whose
  // signature verifies with a known key, about this run, is shown as a signed receipt (docs/control-data.md).
  it('says whether the run\'s receipt.json is signed by a known key, and why not', async () => {
    const run = { run: 'rreceipt', status: 'succeeded' as const, started_at: Date.now() };
    cp.deps.stores.runs.upsert('far', run);
    const check = async () => (await cp.request('GET', '/v1/runs/far/rreceipt')).json.receipt_check;
    const put = (path: string, receipt: unknown) => cp.deps.stores.artifacts.put('far', 'rreceipt', {
      path, content_type: 'application/json', content: Buffer.from(JSON.stringify(receipt)),
    });
    assert.equal(await check(), null, 'no receipt.json');
    const body = {
      type: RECEIPT_TYPE, version: 1, source: 'far', run: 'rreceipt', verdict: 'verified', checks: [], gaps: [],
    } as unknown as ReceiptBody;
    const own = loadOrCreateSigningKey(cp.deps.settings.svcHome);
    put('sub/receipt.json', issueReceipt(body, own));
    assert.equal(await check(), null, 'a receipt.json in a folder is not the run\'s receipt');
    // sha256: of the bytes checked, so a page fetching the file next can tell it is the same file.
    const sha = (receipt: unknown) => createHash('sha256').update(JSON.stringify(receipt)).digest('hex');
    const signed = issueReceipt(body, own);
    put('receipt.json', signed);
    assert.deepEqual(await check(), {
      signed_by: { kid: own.kid, name: 'local', origin: 'local' }, problem: null, unknown_kid: null, sha256: sha(signed),
    });
    const changed = { ...issueReceipt(body, own), verdict: 'verified_with_gaps' };
    put('receipt.json', changed);
    assert.deepEqual(await check(), {
      signed_by: null, problem: 'Integrity mismatch: the receipt was changed after it was issued', unknown_kid: null,
      sha256: sha(changed),
    });
    // Intact, by a key not registered here (a laptop's, another machine's import): the UI says which key to register.
    const pair = generateKeyPairSync('ed25519');
    const stranger = { ...pair, kid: keyIdOf(pair.publicKey) };
    const foreign = issueReceipt(body, stranger);
    put('receipt.json', foreign);
    assert.deepEqual(await check(), {
      signed_by: null, problem: `Unknown key: no public key with kid "${stranger.kid}" is known here`,
      unknown_kid: stranger.kid, sha256: sha(foreign),
    });
    const other = issueReceipt({ ...body, run: 'rother' }, own);
    put('receipt.json', other);
    assert.deepEqual(await check(), {
      signed_by: null, problem: 'The receipt belongs to another run', unknown_kid: null, sha256: sha(other),
    });
  });

  // A read: it never makes the Control Plane's signing key, and a key it cannot read is the check's problem, not a 500.
  it('checks a receipt without making a signing key, and answers 200 when the keys cannot be read', async () => {
    const fresh = await startTestControl();
    try {
      const home = fresh.deps.settings.svcHome;
      rmSync(join(home, 'keys'), { recursive: true, force: true });
      fresh.deps.stores.runs.upsert('far', { run: 'rkeys', status: 'succeeded', started_at: Date.now() });
      fresh.deps.stores.artifacts.put('far', 'rkeys', {
        path: 'receipt.json', content_type: 'application/json', content: Buffer.from('{"type":"x"}'),
      });
      const first = await fresh.request('GET', '/v1/runs/far/rkeys');
      assert.equal(first.status, 200);
      assert.equal(first.json.receipt_check.signed_by, null);
      assert.equal(hasSigningKey(home), false, 'a GET made no signing key');
      // A corrupt private key PEM: the run detail still answers, with the reason in receipt_check.problem.
      mkdirSync(join(home, 'keys'), { recursive: true });
      writeFileSync(join(home, 'keys', 'receipt-ed25519.pem'), 'not a key\n');
      const signed = issueReceipt({
        type: RECEIPT_TYPE, version: 1, source: 'far', run: 'rkeys', verdict: 'verified', checks: [], gaps: [],
      } as unknown as ReceiptBody, { ...generateKeyPairSync('ed25519'), kid: '0123456789abcdef' });
      fresh.deps.stores.artifacts.put('far', 'rkeys', {
        path: 'receipt.json', content_type: 'application/json', content: Buffer.from(JSON.stringify(signed)),
      });
      const corrupt = await fresh.request('GET', '/v1/runs/far/rkeys');
      assert.equal(corrupt.status, 200);
      assert.equal(corrupt.json.receipt_check.signed_by, null);
      assert.match(corrupt.json.receipt_check.problem, /^The receipt could not be checked: /);
    } finally {
      await fresh.close();
    }
  });
});

describe('GET /v1/runs?source=', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    cp.deps.stores.runs.upsert('local', makeRun(1));
    cp.deps.stores.runs.upsert('laptop', makeRun(2));
    cp.deps.stores.runs.upsert('ci', makeRun(3));
  });
  after(() => cp.close());

  it('lists only the runs one source sent, and the cached unfiltered page stays whole', async () => {
    const runs = async (q: string): Promise<string[]> => (await cp.request('GET', `/v1/runs${q}`)).json.items.map((r: { source: string }) => r.source);
    // Asked twice so the page cache keeps (and then serves) each page.
    for (let i = 0; i < 2; i++) {
      assert.deepEqual(await runs(''), ['ci', 'laptop', 'local']);
      assert.deepEqual(await runs('?source=laptop'), ['laptop']);
    }
    assert.deepEqual(await runs('?source=nobody'), []);
  });

  it('rejects a malformed source with 400 invalid_param', async () => {
    const res = await cp.request('GET', '/v1/runs?source=..%2Fx');
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
    assert.match(res.json.error.message, /source/);
  });
});

describe('GET /v1/runs/:source/:run attempts when another source names the run\'s group', () => {
  const MAIN = 'main-token-0123456789abcdefghijkl';
  const K8S = 'k8s-runner-token-0123456789abcdef';
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens: [{ source: 'k8s', token: K8S }] } });
  });
  after(() => cp.close());

  it('lists only the run\'s own source\'s attempts, as the list filtered by source and group does', async () => {
    const t = Date.now() - 60_000;
    const own = { source: 'local', runs: [{ run: 'rlocal', status: 'failed', started_at: t, updated_at: t }] };
    assert.equal((await cp.request('POST', '/v1/ingest', { body: own })).status, 200);
    const forged = { run: 'rfake', group_id: 'rlocal', status: 'succeeded', verdict: 'verified', started_at: t + 1, updated_at: t + 1 };
    const res = await cp.request('POST', '/v1/ingest', { token: K8S, body: { source: 'k8s', runs: [forged] } });
    assert.equal(res.status, 200, res.text);
    const detail = (await cp.request('GET', '/v1/runs/local/rlocal')).json;
    assert.deepEqual(detail.attempts.map((a: { source: string; run: string }) => `${a.source}/${a.run}`), ['local/rlocal']);
    const chain = (await cp.request('GET', '/v1/runs?source=local&group_id=rlocal')).json;
    assert.deepEqual(chain.items.map((r: { source: string; run: string }) => `${r.source}/${r.run}`), ['local/rlocal']);
    // The k8s run is its own source's: its detail shows its own group, the one its runner named.
    const theirs = (await cp.request('GET', '/v1/runs/k8s/rfake')).json;
    assert.deepEqual(theirs.attempts.map((a: { source: string; run: string }) => `${a.source}/${a.run}`), ['k8s/rfake']);
  });
});

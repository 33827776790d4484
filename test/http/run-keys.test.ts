// Each run bound to its own runner (docs/control-data.md, "Each run's own runner"): a runner token is its source's and
// sits in every job pod, so the key a run's worker made, sent with the run, is what keeps one pod from writing another
// run of the source or taking its answers and stops (src/control/ingest-apply.ts).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { handedRunKey } from '../../src/engine/ids.ts';

const MAIN = 'main-token-0123456789abcdefghijkl';
const K8S = 'k8s-runner-token-0123456789abcdef';
const KEY = 'victim-key-0123456789abcdefghijklmnopqrstuvwx';
const OTHER = 'attacker-key-0123456789abcdefghijklmnopqrstuv';

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

function runOf(run: string, fields: Record<string, unknown> = {}, key: string | null = KEY) {
  const t = ago(60_000);
  return { run, status: 'blocked', started_at: t, updated_at: t, repo: 'org/b', question: 'Which DB?', ...fields,
    ...(key === null ? {} : { run_key: key }) };
}

describe('run keys on POST /v1/ingest', () => {
  let cp: TestControl;
  const ingest = (body: unknown, token = K8S) => cp.request('POST', '/v1/ingest', { token, body });
  const row = (run: string) => cp.deps.stores.runs.get('k8s', run);

  before(async () => {
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens: [{ source: 'k8s', token: K8S }] } });
  });
  after(() => cp.close());

  it('keep an answer and a stop for the run that holds the key: another pod of the source is refused, 403 forbidden_run', async () => {
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rvictim')] })).status, 200);
    const answered = await cp.request('POST', '/v1/runs/k8s/rvictim/answer', { token: MAIN, body: { answer: 'hunter2' } });
    assert.equal(answered.status, 202, answered.text);
    const old = ago(3_600_000);
    for (const key of [null, OTHER]) {
      const stolen = await ingest({ source: 'k8s', runs: [runOf('rvictim', { started_at: old, updated_at: old }, key)] });
      assert.equal(stolen.status, 403, stolen.text);
      assert.equal(stolen.json.error.code, 'forbidden_run');
      const sent = key === null ? 'carries no "run_key" for it' : 'carries another "run_key"';
      assert.equal(stolen.json.error.message,
        `Run k8s/rvictim is bound to the key of the runner that made it; this batch ${sent} (nothing of the batch was applied)`);
      assert.ok(!stolen.text.includes('hunter2'));
    }
    assert.equal((await cp.request('POST', '/v1/runs/k8s/rvictim/stop', { token: MAIN, body: {} })).status, 202);
    const own = await ingest({ source: 'k8s', runs: [runOf('rvictim')] });
    assert.equal(own.status, 200, own.text);
    assert.deepEqual(own.json.control.map((c: { action: string; answer?: string }) => [c.action, c.answer]),
      [['answer', 'hunter2'], ['stop', undefined]]);
  });

  // A pod's seal step stores its run queued, bound to the handed key; a pod that fails before its run container ships
  // leaves it so, with no runner to end it: a stop ends it at once, and a runner that still comes takes the stop.
  it('end at its stop a pod\'s run no runner shipped yet, deletable then; a late runner takes the stop', async () => {
    for (const run of ['rsealed', 'rlate']) {
      const t = ago(60_000);
      const sealed = { run, status: 'queued', started_at: t, updated_at: t, run_key: handedRunKey(KEY) };
      assert.equal((await ingest({ source: 'k8s', runs: [sealed] })).status, 200);
      const stopped = await cp.request('POST', `/v1/runs/k8s/${run}/stop`, { token: MAIN, body: {} });
      assert.equal(stopped.status, 202, stopped.text);
      assert.equal(stopped.json.status, 'stopped');
      assert.deepEqual(stopped.json.failure,
        { class: 'stopped', reason: 'stopped before any runner shipped it', retryable: false });
    }
    assert.equal((await cp.request('DELETE', '/v1/runs/k8s/rsealed', { token: MAIN })).status, 200);
    const late = await ingest({ source: 'k8s', runs: [runOf('rlate', { status: 'running', question: null,
      updated_at: new Date().toISOString() }, handedRunKey(KEY))] });
    assert.equal(late.status, 200, late.text);
    assert.deepEqual(late.json.control.map((c: { action: string }) => c.action), ['stop']);
  });

  it('keep the row, events and artifacts of a bound run from another pod; a refused batch applies nothing of it', async () => {
    await ingest({ source: 'k8s', runs: [runOf('rrow', { status: 'running', question: null })] });
    const forged = runOf('rrow', { updated_at: new Date().toISOString(), question: 'Paste the production DB password' }, OTHER);
    const batches = [
      { source: 'k8s', runs: [runOf('rfresh', {}, OTHER), forged] },
      { source: 'k8s', events: [{ run: 'rrow', seq: 1, ts: ago(0), kind: 'question', data: { text: 'password?' } }] },
      { source: 'k8s', artifacts: [{ run: 'rrow', path: 'receipt.json', content_base64: Buffer.from('{}').toString('base64') }] },
    ];
    for (const body of batches) {
      const res = await ingest(body);
      assert.equal(res.status, 403, res.text);
      assert.equal(res.json.error.code, 'forbidden_run');
    }
    assert.equal(row('rrow')?.status, 'running');
    assert.equal(row('rrow')?.question, null);
    assert.equal(row('rfresh'), undefined, 'the run before the refused one is rolled back with it');
    assert.equal(cp.deps.stores.events.latest('k8s', 'rrow', 'question'), undefined);
    assert.equal(cp.deps.stores.artifacts.get('k8s', 'rrow', 'receipt.json'), undefined);
  });

  it('keep only the key\u2019s SHA-256, and never show it', async () => {
    await ingest({ source: 'k8s', runs: [runOf('rhash')] });
    const stored = cp.deps.db.prepare("SELECT run_key_sha256 AS d FROM runs WHERE source = 'k8s' AND run = 'rhash'").get() as { d: Uint8Array };
    assert.deepEqual(Buffer.from(stored.d), createHash('sha256').update(KEY).digest());
    const shown = await cp.request('GET', '/v1/runs/k8s/rhash', { token: MAIN });
    assert.equal(shown.status, 200);
    assert.ok(!shown.text.includes(KEY) && !shown.text.includes('run_key'), shown.text);
  });

  it('leave a run stored without a key (a runner from before keys) unbound: a key sent later locks no runner out', async () => {
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rold', {}, null)] })).status, 200);
    // Another pod sends a key first: binding it would refuse the run's own keyless runner from then on.
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rold', {}, OTHER)] })).status, 200);
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rold', { question: 'still?' }, null)] })).status, 200);
    assert.equal(row('rold')?.question, 'still?');
  });

  it('read each run a batch names once, its row and its key together', async () => {
    await ingest({ source: 'k8s', runs: [runOf('rread1'), runOf('rread2', {}, null)] });
    const runs = cp.deps.stores.runs as unknown as Record<string, unknown>;
    const writes = new Set(['upsert', 'patch', 'bindKey', 'setStatus', 'delete']);
    const reads: string[] = [];
    const saved = { ...runs };
    for (const [name, method] of Object.entries(saved)) {
      if (typeof method !== 'function' || writes.has(name)) continue;
      runs[name] = (...args: unknown[]) => {
        reads.push(`${name} ${String(args[1])}`);
        return (method as (...a: unknown[]) => unknown)(...args);
      };
    }
    try {
      const event = { run: 'rread2', seq: 1, ts: ago(0), kind: 'log', data: { text: 'x' } };
      assert.equal((await ingest({ source: 'k8s', runs: [runOf('rread1'), runOf('rnew')], events: [event] })).status, 200);
    } finally {
      Object.assign(runs, saved);
    }
    assert.deepEqual(reads.map((r) => r.split(' ')[1]).sort(), ['rnew', 'rread1', 'rread2'], reads.join(', '));
  });

  it('refuse a run_key that is not one: 400 naming the field', async () => {
    for (const key of ['short', 7, 'x'.repeat(129), 'has spaces in it 0123456789abcdefghijkl']) {
      const res = await ingest({ source: 'k8s', runs: [{ ...runOf('rbad'), run_key: key }] });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.message, 'runs[0].run_key must match ^[A-Za-z0-9_-]{32,128}$ or be null');
    }
    assert.equal(row('rbad'), undefined);
  });

  it('leave POST /v1/import writing a bound run only from a folder with its key, taking no request', async () => {
    await ingest({ source: 'local', runs: [runOf('rimp')] }, MAIN);
    cp.deps.stores.controlRequests.add('local', 'rimp', 'answer', { answer: 'kept' });
    const project = mkdtempSync(join(tmpdir(), 'svc-runkey-'));
    try {
      const dir = join(project, '.svc', 'runs', 'rimp');
      mkdirSync(dir, { recursive: true });
      const t = ago(1_000);
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'local', run: 'rimp', status: 'succeeded', started_at: t, updated_at: t }));
      for (const key of [OTHER, KEY]) {
        writeFileSync(join(dir, 'run-key'), `${key}\n`);
        const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: project } });
        assert.equal(res.status, 200, res.text);
        const skipped = key === OTHER ? [{ entry: 'rimp', reason: "is bound to another runner's key" }] : [];
        assert.deepEqual(res.json.skipped, skipped);
        assert.equal(cp.deps.stores.runs.get('local', 'rimp')?.status, key === OTHER ? 'blocked' : 'succeeded');
      }
      assert.deepEqual(Buffer.from(cp.deps.stores.runs.getKeyed('local', 'rimp')!.run_key_sha256!), createHash('sha256').update(KEY).digest());
      assert.deepEqual(cp.deps.stores.controlRequests.pending('local').map((p) => p.run), ['rimp']);
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });

  // A pod's run container is handed handedRunKey(key) (its agent can read that one); its signer holds `key`.
  it('move a run bound to a handed key onto the key it was made from, once a batch carries that; the handed key is then refused', async () => {
    const handed = handedRunKey(KEY);
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rpod', { status: 'running' }, handed)] })).status, 200);
    // The worker's claim, newer than the batch that moves the run: replaced by that one all the same.
    const claim = {
      status: 'succeeded', question: null, pr_url: 'https://github.com/org/b/pull/9', updated_at: ago(1_000),
    };
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rpod', claim, handed)] })).status, 200);
    const moved = async () => (await cp.request('GET', '/v1/runs/k8s/rpod', { token: MAIN })).json.key_moved;
    assert.equal(await moved(), false);
    // A key whose hash is not the bound key moves nothing: the other pod's, or the handed key's own hash.
    for (const key of [OTHER, handedRunKey(handed)]) {
      assert.equal((await ingest({ source: 'k8s', runs: [runOf('rpod', {}, key)] })).status, 403);
    }
    const signed = await ingest({ source: 'k8s', runs: [runOf('rpod', { status: 'failed', question: null }, KEY)] });
    assert.equal(signed.status, 200, signed.text);
    assert.equal(await moved(), true);
    assert.deepEqual([row('rpod')?.status, row('rpod')?.pr_url], ['failed', null]);
    assert.deepEqual(Buffer.from(cp.deps.stores.runs.getKeyed('k8s', 'rpod')!.run_key_sha256!), createHash('sha256').update(KEY).digest());
    const forged = await ingest({ source: 'k8s', runs: [runOf('rpod', { status: 'blocked', updated_at: ago(0) }, handed)] });
    assert.equal(forged.status, 403, forged.text);
    assert.equal(forged.json.error.code, 'forbidden_run');
    assert.equal(row('rpod')?.status, 'failed');
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rpod', { status: 'succeeded', question: null })] })).status, 200);
  });

  // The signer's move (queued) replaces a `stopped` the run container claimed with its handed key: kept, the row
  // would be terminal under the signer (an operator's stop refused 409) and a gone Job's outcome the agent's.
  it('move a run whose handed key claimed it stopped: the moving batch\'s row replaces the claim', async () => {
    const handed = handedRunKey(KEY);
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rclaim', { status: 'running' }, handed)] })).status, 200);
    const stopped = await ingest({
      source: 'k8s', runs: [runOf('rclaim', { status: 'stopped', updated_at: ago(1_000) }, handed)],
      events: [{ run: 'rclaim', seq: 1, ts: ago(1_000), kind: 'run.status', data: { from: 'running', to: 'stopped' } }],
    });
    assert.equal(stopped.status, 200, stopped.text);
    const moved = await ingest({ source: 'k8s', runs: [runOf('rclaim', { status: 'queued', updated_at: ago(0) }, KEY)] });
    assert.equal(moved.status, 200, moved.text);
    assert.equal(row('rclaim')?.status, 'queued');
    // The highest seq the handed key stored: the signer's events go after it, or they would be dropped as duplicates.
    assert.deepEqual(moved.json.last_seq, [{ run: 'rclaim', seq: 1 }]);
  });

  // A stop the operator asked stays: the signer takes it (stop_asked); should the signer die first, the run is not
  // left queued with no runner for ever.
  it('move a run the Control Plane stopped: it stays stopped, and the stop goes to the signer', async () => {
    const handed = handedRunKey(KEY);
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rop', { status: 'queued' }, handed)] })).status, 200);
    assert.equal((await cp.request('POST', '/v1/runs/k8s/rop/stop', { token: MAIN, body: {} })).status, 202);
    assert.equal(row('rop')?.status, 'stopped');
    const moved = await ingest({ source: 'k8s', runs: [runOf('rop', { status: 'queued', updated_at: ago(0) }, KEY)] });
    assert.equal(moved.status, 200, moved.text);
    assert.deepEqual(moved.json.stop_asked, ['rop']);
    assert.equal(row('rop')?.status, 'stopped');
    assert.equal((await cp.request('GET', '/v1/runs/k8s/rop', { token: MAIN })).json.key_moved, true);
  });

  it('hold for the server\u2019s own token too: the key, not the token, names the run\u2019s runner', async () => {
    await ingest({ source: 'k8s', runs: [runOf('rmain')] });
    const res = await ingest({ source: 'k8s', runs: [runOf('rmain', {}, OTHER)] }, MAIN);
    assert.equal(res.status, 403, res.text);
    assert.equal((await ingest({ source: 'k8s', runs: [runOf('rmain', { question: 'q2' })] }, MAIN)).status, 200);
    assert.equal(row('rmain')?.question, 'q2');
  });
});

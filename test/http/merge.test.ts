import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readFileSync, writeFileSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { generateKeyPairSync } from 'node:crypto';
import { issueReceipt, type Receipt } from '../../src/engine/receipt.ts';
import { keyIdOf, trustedKeysDir, rotateSigningKey } from '../../src/keys.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, startGithubStandIn, EDIT_SCRIPT, GIT_ENV, type StandIn, type TestRepo } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startRedirectPair } from '../helpers/redirect-pair.ts';

describe('merge queue and review risk', () => {
  let github: StandIn;
  let control: TestControl;
  let repo: TestRepo;

  const POLICY = { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }], pr: { open: 'verified_with_gaps', draft: true } };
  function writePolicy(policy: unknown): void {
    rmSync(join(repo.repo, '.svc', 'policy.json'), { force: true });
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify(policy));
  }

  before(async () => {
    github = await startGithubStandIn({ originOf: (owner, name) => join(repo.root, owner, `${name}.git`) });
    // Two checks: "fixed" passes after the edit; "strict" fails unless STRICT_OK exists, so one run can be made unverified.
    repo = makeRepo({
      policy: POLICY,
      providers: { fake: EDIT_SCRIPT, nothing: '#!/bin/sh\ncat > /dev/null\n' },
    });
    control = await startTestControl({ env: { GITHUB_API_URL: github.url, GITHUB_TOKEN: 'gh-test-token', ...GIT_ENV }, projects: [repo.repo] });
  });
  after(async () => {
    await control.close();
    await github.close();
    repo.cleanup();
  });

  async function finished(provider: string) {
    const started = (await control.request('POST', '/v1/start', { body: { brief: 'work', repo: repo.repo, provider, pr: true } })).json;
    return waitFor(async () => {
      const r = (await control.request('GET', `/v1/runs/${started.source}/${started.run}`)).json;
      return r.status === 'succeeded' || r.status === 'failed' ? r : null;
    }, 'run to finish');
  }

  it('queues a verified run with a PR and merges it through the GitHub stand-in, re-checking the receipt', async () => {
    const run = await finished('fake');
    assert.equal(run.verdict, 'verified');
    const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
    assert.equal(add.status, 201);
    assert.equal(add.json.status, 'queued');
    const again = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
    assert.equal(again.status, 200, 'already queued');
    assert.equal(again.json.id, add.json.id);
    const list = await control.request('GET', '/v1/merge/queue');
    assert.equal(list.json.items.length, 1);
    const merged = await control.request('POST', '/v1/merge/run', { body: {} });
    assert.equal(merged.status, 200);
    assert.equal(merged.json.items[0].status, 'merged', merged.json.items[0].detail);
    const put = github.requests.find((r) => r.method === 'PUT' && /\/repos\/acme\/api\/pulls\/\d+\/merge$/.test(r.path));
    assert.ok(put, 'the stand-in got a merge');
    assert.ok(github.requests.some((r) => r.method === 'GET' && put.path === `${r.path}/merge`), 'the pull request was read before merging');
    const receipt = JSON.parse(Buffer.from(control.deps.stores.artifacts.get(run.source, run.run, 'receipt.json')!.content).toString('utf8'));
    assert.match(receipt.head_sha, /^[0-9a-f]{40}$/);
    assert.deepEqual(put.body, { sha: receipt.head_sha });
    assert.equal(github.pulls.get(Number(/\d+$/.exec(run.pr_url)![0]))?.head_sha, receipt.head_sha, 'the pushed branch is the receipt commit');
  });

  async function queueAndRun(run: { source: string; run: string }) {
    const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
    assert.equal(add.status, 201);
    const result = await control.request('POST', '/v1/merge/run', { body: {} });
    return result.json.items.find((e: { run: string }) => e.run === run.run);
  }

  function mergesOf(owner: string, name: string, number: number): number {
    return github.requests.filter((r) => r.method === 'PUT' && r.path === `/repos/${owner}/${name}/pulls/${number}/merge`).length;
  }

  /** The run's own key (its folder's run-key), which whoever can edit the project can read and send. */
  function keyOf(run: { run: string }): string {
    return readFileSync(join(repo.repo, '.svc', 'runs', run.run, 'run-key'), 'utf8').trim();
  }

  // The ingests below name the run's own project and carry its key, as a state.json edited in that project can
  // (docs/control-data.md).
  it('refuses to merge a PR in another repository after an ingest rewrote the run\'s pr_url', async () => {
    const run = await finished('fake');
    github.pulls.set(900, { owner: 'evil', repo: 'other', number: 900, head: `svc/${run.run}`, base: 'main', head_sha: null });
    const rewritten = { ...run, run_key: keyOf(run), repo_path: repo.repo, pr_url: 'https://github.example/evil/other/pull/900', updated_at: new Date(Date.parse(run.updated_at) + 1).toISOString() };
    assert.equal((await control.request('POST', '/v1/ingest', { body: { source: run.source, runs: [rewritten] } })).status, 200);
    const entry = await queueAndRun(run);
    assert.equal(entry.status, 'failed');
    assert.match(entry.detail, /evil\/other, not acme\/api/);
    assert.equal(mergesOf('evil', 'other', 900), 0);
  });

  it('fails an entry whose pr_url is no pull request page, or a pull request GitHub does not find, merging nothing', async () => {
    const puts = () => github.requests.filter((r) => r.method === 'PUT').length;
    const before = puts();
    const cases: Array<[string, RegExp]> = [
      ['https://github.example/acme/api/issues/7', /^Cannot read the pull request from https:\/\/github\.example\/acme\/api\/issues\/7$/],
      ['https://github.example/acme/api/pull/9999', /^GitHub answered 404 when reading the pull request: .*Not Found/],
    ];
    for (const [prUrl, detail] of cases) {
      const run = await finished('fake');
      const rewritten = { ...run, run_key: keyOf(run), repo_path: repo.repo, pr_url: prUrl, updated_at: new Date(Date.parse(run.updated_at) + 1).toISOString() };
      assert.equal((await control.request('POST', '/v1/ingest', { body: { source: run.source, runs: [rewritten] } })).status, 200);
      const entry = await queueAndRun(run);
      assert.equal(entry.status, 'failed');
      assert.match(entry.detail, detail);
    }
    assert.equal(puts(), before);
  });

  // The GitHub token goes only to GITHUB_API_URL's origin (DESIGN §7a): a redirect of the read or of the merge fails
  // the entry naming it, and nothing reaches where it points.
  for (const method of ['GET', 'PUT']) {
    it(`fails an entry whose ${method} GitHub answers with a 307, sending neither the token nor the merge on`,
      async () => {
        const run = await finished('fake');
        const pair = await startRedirectPair(307);
        github.redirect = { method, to: pair.target };
        try {
          const entry = await queueAndRun(run);
          assert.equal(entry.status, 'failed');
          assert.match(entry.detail, /^GitHub answered 307/);
          assert.deepEqual(pair.reached, []);
        } finally {
          github.redirect = null;
          await pair.close();
        }
      });
  }

  it('refuses to merge a PR of the same repository whose head is another branch', async () => {
    const first = await finished('fake');
    const second = await finished('fake');
    const rewritten = { ...second, run_key: keyOf(second), repo_path: repo.repo, pr_url: first.pr_url, updated_at: new Date(Date.parse(second.updated_at) + 1).toISOString() };
    await control.request('POST', '/v1/ingest', { body: { source: second.source, runs: [rewritten] } });
    const entry = await queueAndRun(second);
    assert.equal(entry.status, 'failed');
    assert.match(entry.detail, new RegExp(`not acme/api:svc/${second.run}`));
    assert.equal(mergesOf('acme', 'api', Number(/\d+$/.exec(first.pr_url)![0])), 0);
  });

  it('refuses to merge when commits were pushed to the PR after its receipt', async () => {
    const run = await finished('fake');
    const pull = github.pulls.get(Number(/\d+$/.exec(run.pr_url)![0]))!;
    pull.head_sha = 'a'.repeat(40);
    const entry = await queueAndRun(run);
    assert.equal(entry.status, 'failed');
    assert.match(entry.detail, /commits the receipt does not cover/);
    assert.equal(mergesOf('acme', 'api', pull.number), 0);
  });

  it('records no merge for a PR GitHub reports merged without naming the receipt\'s head (by hand)', async () => {
    const run = await finished('fake');
    const pull = github.pulls.get(Number(/\d+$/.exec(run.pr_url)![0]))!;
    pull.merged = true;
    pull.head_sha = null;
    const entry = await queueAndRun(run);
    assert.equal(entry.status, 'failed');
    assert.match(entry.detail, /merged already, not at the receipt's head/);
    assert.equal(mergesOf('acme', 'api', pull.number), 0);
  });

  it('refuses to queue a run whose required check failed (no PR, not_verified)', async () => {
    const run = await finished('nothing');
    assert.equal(run.status, 'failed');
    assert.equal(run.verdict, 'not_verified');
    assert.equal(run.pr_url, null);
    const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
    assert.equal(add.status, 409);
    assert.equal(add.json.error.code, 'conflict');
    assert.equal(add.json.error.message, `Run ${run.source}/${run.run} has no pull request`);
  });

  it('refuses a verified_with_gaps receipt once the policy asks for verified, at queue time and at merge time', async () => {
    // An optional check that fails makes the verdict verified_with_gaps; the PR still opens under pr.open "verified_with_gaps".
    writePolicy({ ...POLICY, checks: [...POLICY.checks, { name: 'optional', run: ['false'], required: false }] });
    try {
      const run = await finished('fake');
      assert.equal(run.verdict, 'verified_with_gaps');
      assert.ok(run.pr_url, 'the run opened a PR');
      const queued = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
      assert.equal(queued.status, 201);
      const later = await finished('fake');
      assert.equal(later.verdict, 'verified_with_gaps');
      writePolicy({ ...POLICY, pr: { open: 'verified', draft: true } });
      const refused = await control.request('POST', '/v1/merge/queue', { body: { source: later.source, run: later.run } });
      assert.equal(refused.status, 409);
      assert.equal(refused.json.error.code, 'conflict');
      assert.equal(refused.json.error.message, 'Verdict verified_with_gaps is not accepted by the policy (pr.open = "verified")');
      const puts = github.requests.filter((r) => r.method === 'PUT').length;
      const result = await control.request('POST', '/v1/merge/run', { body: {} });
      const entry = result.json.items.find((e: { run: string }) => e.run === run.run);
      assert.equal(entry.status, 'failed');
      assert.equal(entry.detail, 'Verdict verified_with_gaps is not accepted by the policy (pr.open = "verified")');
      assert.equal(github.requests.filter((r) => r.method === 'PUT').length, puts);
    } finally {
      writePolicy(POLICY);
    }
  });

  it('refuses to queue while policy.json is a link to /dev/zero or a host file, and serves on', async () => {
    const run = await finished('fake');
    const host = join(repo.root, 'host-secret.json');
    writeFileSync(host, '{"host_secret_key": 1}');
    try {
      for (const target of ['/dev/zero', host]) {
        rmSync(join(repo.repo, '.svc', 'policy.json'));
        symlinkSync(target, join(repo.repo, '.svc', 'policy.json'));
        const refused = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
        assert.equal(refused.status, 409);
        assert.equal(refused.json.error.message, 'Policy: policy.json is a symbolic link (never followed)');
      }
    } finally {
      writePolicy(POLICY);
    }
    assert.equal((await control.request('GET', '/v1/merge/queue')).status, 200);
  });

  it('refuses to queue a run whose stored receipt is another run\'s, genuine as it is', async () => {
    const first = await finished('fake');
    const second = await finished('fake');
    const receipt = control.deps.stores.artifacts.get(first.source, first.run, 'receipt.json')!;
    control.deps.stores.artifacts.put(second.source, second.run, { path: 'receipt.json', content_type: 'application/json', content: Buffer.from(receipt.content) });
    const refused = await control.request('POST', '/v1/merge/queue', { body: { source: second.source, run: second.run } });
    assert.equal(refused.status, 409);
    assert.equal(refused.json.error.message, 'The receipt belongs to another run');
  });

  it('lists a queued entry whose run was deleted, and fails it at merge time without calling GitHub', async () => {
    const run = await finished('fake');
    assert.equal((await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } })).status, 201);
    assert.equal((await control.request('DELETE', `/v1/runs/${run.source}/${run.run}`, { body: {} })).status, 200);
    const listed = (await control.request('GET', '/v1/merge/queue')).json.items.find((e: { run: string }) => e.run === run.run);
    assert.deepEqual([listed.status, listed.pr_url, listed.verdict, listed.signed_by], ['queued', null, null, null]);
    const before = github.requests.length;
    const result = await control.request('POST', '/v1/merge/run', { body: {} });
    const entry = result.json.items.find((e: { run: string }) => e.run === run.run);
    assert.deepEqual([entry.status, entry.detail], ['failed', 'The run no longer exists']);
    assert.equal(github.requests.length, before);
  });

  it('fails a queued entry at merge time when its receipt was tampered with', async () => {
    const run = await finished('fake');
    const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
    assert.equal(add.status, 201);
    const stored = control.deps.stores.artifacts.get(run.source, run.run, 'receipt.json')!;
    const receipt = JSON.parse(Buffer.from(stored.content).toString('utf8'));
    receipt.verdict = 'verified';
    receipt.diff.files = 99;
    control.deps.stores.artifacts.put(run.source, run.run, { path: 'receipt.json', content_type: 'application/json', content: Buffer.from(JSON.stringify(receipt)) });
    const before = github.requests.filter((r) => r.method === 'PUT').length;
    const result = await control.request('POST', '/v1/merge/run', { body: {} });
    const entry = result.json.items.find((e: { run: string }) => e.run === run.run);
    assert.equal(entry.status, 'failed');
    assert.match(entry.detail, /Integrity mismatch/);
    assert.equal(github.requests.filter((r) => r.method === 'PUT').length, before);
  });

  describe('receipt keys', () => {
    /** The run's receipt as stored, re-signed by a key of our own making (valid integrity and signature). */
    function resign(run: { source: string; run: string }) {
      const stored = control.deps.stores.artifacts.get(run.source, run.run, 'receipt.json')!;
      const { kid: _k, integrity: _i, signature: _s, ...body } = JSON.parse(Buffer.from(stored.content).toString('utf8')) as Receipt;
      const pair = generateKeyPairSync('ed25519');
      const receipt = issueReceipt(body, { kid: keyIdOf(pair.publicKey), privateKey: pair.privateKey, publicKey: pair.publicKey });
      control.deps.stores.artifacts.put(run.source, run.run, { path: 'receipt.json', content_type: 'application/json', content: Buffer.from(JSON.stringify(receipt)) });
      return { pair, kid: receipt.kid };
    }

    it('queues a receipt signed by its own key and says which key signed, in the reply and the audit', async () => {
      const run = await finished('fake');
      const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
      assert.equal(add.status, 201, add.text);
      const keys = (await control.request('GET', '/v1/keys')).json.keys;
      assert.deepEqual(add.json.signed_by, { kid: keys[0].kid, name: 'local', origin: 'local' });
      const audit = (await control.request('GET', '/v1/audit?limit=1')).json.items[0];
      assert.equal(audit.action, 'merge.enqueue');
      assert.equal(audit.detail.signed_by, keys[0].kid);
    });

    it('refuses a receipt signed by a key the Control Plane does not know, at queue time and at merge time', async () => {
      const run = await finished('fake');
      const { kid } = resign(run);
      const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
      assert.equal(add.status, 409, add.text);
      assert.equal(add.json.error.code, 'conflict');
      assert.match(add.json.error.message, new RegExp(`Unknown key.*${kid}`));
      const queued = await finished('fake');
      assert.equal((await control.request('POST', '/v1/merge/queue', { body: { source: queued.source, run: queued.run } })).status, 201);
      resign(queued);
      const result = await control.request('POST', '/v1/merge/run', { body: {} });
      const entry = result.json.items.find((e: { run: string }) => e.run === queued.run);
      assert.equal(entry.status, 'failed');
      assert.match(entry.detail, /Unknown key/);
      assert.equal(entry.signed_by, null);
      const pull = /\/pull\/(\d+)$/.exec(queued.pr_url)![1];
      assert.deepEqual(github.requests.filter((r) => r.method === 'PUT' && r.path.includes(`/pulls/${pull}/`)), [], 'its PR was not merged');
    });

    it('accepts a runner key once its public half is registered, lists it in /v1/keys and never a private key', async () => {
      const run = await finished('fake');
      const { pair, kid } = resign(run);
      const dir = trustedKeysDir(control.deps.settings.svcHome);
      mkdirSync(dir, { recursive: true });
      // A private key dropped in the registry by mistake is not a registration.
      writeFileSync(join(dir, 'oops.pem'), pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
      assert.equal((await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } })).status, 409);
      writeFileSync(join(dir, 'ci-runner.pub.pem'), pair.publicKey.export({ type: 'spki', format: 'pem' }).toString());
      const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
      assert.equal(add.status, 201, add.text);
      assert.deepEqual(add.json.signed_by, { kid, name: 'ci-runner', origin: 'runner' });
      const keys = (await control.request('GET', '/v1/keys')).json.keys;
      assert.deepEqual(keys.map((k: { name: string; origin: string }) => [k.name, k.origin]), [['local', 'local'], ['ci-runner', 'runner']]);
      assert.equal(keys[1].kid, kid);
      assert.doesNotMatch(JSON.stringify(keys), /PRIVATE/);
      const list = (await control.request('GET', '/v1/merge/queue')).json.items.find((e: { run: string }) => e.run === run.run);
      assert.equal(list.signed_by.name, 'ci-runner');
    });

    it('still accepts a receipt its own key signed before a rotation (svc keys rotate), and refuses it once revoked', async () => {
      const run = await finished('fake');
      const signedBy = (await control.request('GET', '/v1/keys')).json.keys[0].kid;
      const rotated = rotateSigningKey(control.deps.settings.svcHome);
      assert.equal(rotated.old, signedBy);
      const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
      assert.equal(add.status, 201, add.text);
      assert.deepEqual(add.json.signed_by, { kid: signedBy, name: 'local', origin: 'retired' });
      const later = await finished('fake');
      rotateSigningKey(control.deps.settings.svcHome, { revoke: true });
      const refused = await control.request('POST', '/v1/merge/queue', { body: { source: later.source, run: later.run } });
      assert.equal(refused.status, 409, refused.text);
      assert.match(refused.json.error.message, new RegExp(`Unknown key.*${rotated.new}`));
    });
  });

  it('scores review risk from the run diff and verdict', async () => {
    const run = await finished('fake');
    const res = await control.request('GET', `/v1/review/risk?source=${run.source}&run=${run.run}`);
    assert.equal(res.status, 200);
    assert.ok(res.json.score >= 0 && res.json.score <= 100);
    assert.ok(['low', 'medium', 'high', 'critical'].includes(res.json.level));
    assert.deepEqual(res.json.files.map((f: { path: string }) => f.path), ['a.txt']);
    assert.ok(res.json.reasons.includes('no tests changed'));
    const missing = await control.request('GET', `/v1/review/risk?source=${run.source}`);
    assert.equal(missing.status, 400);
  });
  it('answers 200 with what was merged when storing an outcome meets a full disk, naming the entry not recorded', async () => {
    const first = await finished('fake');
    const second = await finished('fake');
    const ids: number[] = [];
    for (const run of [first, second]) {
      const add = await control.request('POST', '/v1/merge/queue', { body: { source: run.source, run: run.run } });
      assert.equal(add.status, 201);
      ids.push(add.json.id);
    }
    const queue = control.deps.stores.mergeQueue;
    const setStatus = queue.setStatus;
    queue.setStatus = (...args) => {
      if (args[0] === ids[1]) throw Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
      setStatus(...args);
    };
    try {
      const result = await control.request('POST', '/v1/merge/run', { body: {} });
      assert.equal(result.status, 200, result.text);
      const items = result.json.items.map((e: { run: string; status: string }) => [e.run, e.status]);
      assert.deepEqual(items.slice(-1), [[first.run, 'merged']]);
      assert.equal(result.json.not_recorded.length, 1);
      assert.equal(result.json.not_recorded[0].run, second.run);
      assert.equal(result.json.not_recorded[0].status, 'merged', 'GitHub merged it');
      assert.match(result.json.not_recorded[0].error, /could not be stored: database or disk is full/);
    } finally {
      queue.setStatus = setStatus;
    }
    // Asked again, the entry GitHub merged then is recorded merged, from the pull request's state: no second merge.
    const number = Number(/\d+$/.exec(second.pr_url)![0]);
    const again = await control.request('POST', '/v1/merge/run', { body: {} });
    assert.equal(again.status, 200, again.text);
    const entry = again.json.items.find((e: { run: string }) => e.run === second.run);
    assert.equal(entry?.status, 'merged', entry?.detail);
    assert.equal(again.json.not_recorded, undefined);
    assert.equal(mergesOf('acme', 'api', number), 1, 'merged on GitHub once');
  });
});

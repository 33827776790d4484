import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import {
  existsSync, mkdtempSync, mkdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync, rmSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { startRedirectPair } from '../helpers/redirect-pair.ts';
import { idleNode } from '../helpers/run-child.ts';
import {
  createShipLoop, createShipper, shipperClient, type ControlItem,
} from '../../src/engine/shipper.ts';
import { shipRuns } from '../../src/engine/ship-recovery.ts';
import { readRunBatch } from '../../src/engine/run-batch.ts';
import { controlToken, type ControlFound } from '../../src/engine/control-url.ts';
import { openRunFolder } from '../../src/engine/plain-tree.ts';
import { openEventLog } from '../../src/engine/run-state.ts';
import { makeRunKey, writeState, type RunState } from '../../src/engine/run-state.ts';
import { prepareRun } from '../../src/engine/launch.ts';
import { runDir, RUN_KEY_FILE } from '../../src/engine/paths.ts';
import { makeRepo, GIT_ENV, type TestRepo } from './fixtures.ts';

function runFolder(root: string, run: string, status: RunState['status'] = 'running'): string {
  const dir = join(root, run);
  mkdirSync(join(dir, 'artifacts'), { recursive: true });
  const now = new Date().toISOString();
  writeState(dir, {
    source: 'local', run, repo: 'acme/api', group_id: run, status, verdict: null, brief: 'b', origin: 'cli', provider: 'fake',
    branch: null, pr_url: null, question: null, started_at: now, ended_at: null, updated_at: now, cost_usd: null, tokens_in: null,
    tokens_out: null, exit_code: null, error: null, repo_path: root, input: { kind: 'brief', value: 'b' }, workdir: root, worktree: false,
    pr: false, base_sha: 'b'.repeat(40), head_sha: null, spec_sha256: '', pid: null, pgid: null, proc_start: null, budget_usd: null, child: null,
    answers: [], base_branch: 'main', failure: null,
  } satisfies RunState);
  return dir;
}

describe('shipper', () => {
  let control: TestControl;
  let root: string;
  before(async () => {
    control = await startTestControl();
    root = mkdtempSync(join(tmpdir(), 'svc-'));
  });
  after(async () => {
    await control.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('sends state, events and artifacts once, resuming from its offsets', async () => {
    const dir = runFolder(root, 'rship1');
    const log = openEventLog(dir);
    for (let i = 0; i < 1200; i++) log.append('log', { stream: 'stdout', text: `line ${i}` });
    writeFileSync(join(dir, 'artifacts', 'provider.log'), 'hello\n');
    const shipper = createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root });
    assert.equal(await shipper.flush(), null);
    const events = (await control.request('GET', '/v1/runs/local/rship1/events?limit=500')).json.items;
    assert.equal(events.length, 500);
    assert.equal(control.deps.stores.events.listAll({ source: 'local', run: 'rship1', after: 0, limit: 5000 }).length, 1200);
    assert.equal((await control.request('GET', '/v1/runs/local/rship1/artifact/provider.log')).text, 'hello\n');
    log.append('log', { stream: 'stdout', text: 'one more' });
    assert.equal(await shipper.flush(), null);
    assert.equal(control.deps.stores.events.listAll({ source: 'local', run: 'rship1', after: 0, limit: 5000 }).length, 1201);
  });

  it('leaves out an artifact whose name ingest refuses, says so once, and ships the rest', async () => {
    const dir = runFolder(root, 'rshipname');
    writeFileSync(join(dir, 'artifacts', 'a\\b.txt'), 'agent-named\n');
    writeFileSync(join(dir, 'artifacts', 'ok.txt'), 'fine\n');
    const skipped: string[] = [];
    const shipper = createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }, undefined, (entry) => {
      skipped.push(entry);
    });
    assert.equal(await shipper.flush(), null);
    assert.equal((await control.request('GET', '/v1/runs/local/rshipname/artifact/ok.txt')).text, 'fine\n');
    writeFileSync(join(dir, 'artifacts', 'ok.txt'), 'changed\n');
    assert.equal(await shipper.flush(), null);
    assert.deepEqual(skipped, ['artifacts/a\\b.txt']);
  });

  it('splits a run by bytes so no batch passes ingest\'s 16 MiB body cap (huge lines and an artifact)', async () => {
    const dir = runFolder(root, 'rshipbig');
    const log = openEventLog(dir);
    for (const c of 'abc') log.append('log', { stream: 'stdout', text: c.repeat(6 * 1024 * 1024) });
    writeFileSync(join(dir, 'artifacts', 'big.bin'), Buffer.alloc(7 * 1024 * 1024, 1));
    assert.equal(await createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }).flush(), null);
    const stored = control.deps.stores.events.listAll({ source: 'local', run: 'rshipbig', after: 0, limit: 10 });
    assert.equal(stored.length, 3);
    const art = await control.request('GET', '/v1/runs/local/rshipbig/artifact/big.bin');
    assert.equal(art.status, 200);
  });

  it('leaves out a line no batch can carry, says so once, and ships the lines after it', async () => {
    const dir = runFolder(root, 'rshiphuge');
    const log = openEventLog(dir);
    log.append('log', { stream: 'stdout', text: 'before' });
    log.append('log', { stream: 'stdout', text: 'x'.repeat(20 * 1024 * 1024) });
    log.append('log', { stream: 'stdout', text: 'y'.repeat(15 * 1024 * 1024) });
    log.append('log', { stream: 'stdout', text: 'after' });
    const skipped: string[] = [];
    const shipper = createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }, undefined, (entry, why) => {
      skipped.push(`${entry} ${why}`);
    });
    assert.equal(await shipper.flush(), null);
    const stored = control.deps.stores.events.listAll({ source: 'local', run: 'rshiphuge', after: 0, limit: 10 });
    assert.deepEqual(stored.map((e) => JSON.parse(e.data).text), ['before', 'after']);
    assert.equal(skipped.length, 1);
    assert.match(skipped[0]!, /^events\.jsonl lines ingest refuses \(left out; the first: a line of \d+ bytes, more /);
  });

  it('counts a line as the batch body carries it: 2 MB of 1e20 re-serialise to 8.8 MB, one batch each', async () => {
    const dir = runFolder(root, 'rshipwide');
    // JSON.stringify writes 1e20 as 100000000000000000000: each line grows from 2 MB in the file to 8.8 MB in a body.
    const wide = `[${Array(400_000).fill('1e20').join(',')}]`;
    const lines = [1, 2].map((seq) => `{"seq":${seq},"kind":"log","data":{"n":${wide}}}\n`);
    writeFileSync(join(dir, 'events.jsonl'), lines.join(''));
    assert.equal(await createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }).flush(), null);
    const stored = control.deps.stores.events.listAll({ source: 'local', run: 'rshipwide', after: 0, limit: 10 });
    assert.deepEqual(stored.map((e) => e.seq), [1, 2]);
  });

  it("counts an artifact's name in the UTF-8 bytes JSON writes, not UTF-16 units", () => {
    const dir = runFolder(root, 'rshipnames');
    // 8 MiB (11184812 in base64) and 2621163 bytes (3494884): with names counted as UTF-16 units the two fill the
    // batch to 3 bytes under BATCH_BYTES; "é" is two bytes, so counted as the body carries them they do not fit.
    writeFileSync(join(dir, 'artifacts', 'a.bin'), Buffer.alloc(8 * 1024 * 1024));
    writeFileSync(join(dir, 'artifacts', `${'é'.repeat(100)}.txt`), Buffer.alloc(2_621_163));
    const folder = openRunFolder(dir);
    assert.ok(!('failed' in folder));
    try {
      const batch = readRunBatch(folder, null, () => {}, true);
      assert.equal(batch?.artifacts.length, 1);
      assert.equal(batch.more, true);
    } finally {
      folder.close();
    }
  });

  it("cuts a state.json text too long for ingest on a character boundary, not in a surrogate pair", async () => {
    const dir = runFolder(root, 'rshipcut');
    const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as RunState;
    // Ingest takes 65,536 UTF-16 code units; the cut's last unit before its `…` would be an emoji's first half.
    writeState(dir, { ...state, provider: `${'p'.repeat(64 * 1024 - 2)}${'\u{1F600}'.repeat(4)}` });
    const skipped: string[] = [];
    const shipper = createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }, undefined, (entry) => {
      skipped.push(entry);
    });
    assert.equal(await shipper.flush(), null);
    const provider = (await control.request('GET', '/v1/runs/local/rshipcut')).json.provider as string;
    assert.equal(provider, `${'p'.repeat(64 * 1024 - 2)}…`);
    assert.ok(provider.isWellFormed());
    assert.deepEqual(skipped, ['state.json field provider']);
  });

  it('reports why instead of throwing when the Control Plane is down', async () => {
    const dir = runFolder(root, 'rship2');
    openEventLog(dir).append('log', { stream: 'stdout', text: 'x' });
    const failure = await createShipper(dir, { SVC_CONTROL_URL: 'http://127.0.0.1:9', HOME: root }).flush();
    const why = 'no Control Plane answered at http://127.0.0.1:9 (bad port): start the server '
      + 'SVC_CONTROL_URL names, or unset SVC_CONTROL_URL to use a local one';
    assert.deepEqual(failure, { why, everyRun: true });
  });

  it("hands the run's own control requests from the ingest response to its worker, and no other run's", async () => {
    const dir = runFolder(root, 'rship3');
    await createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }).flush();
    control.deps.stores.controlRequests.add('local', 'rship3', 'stop');
    control.deps.stores.controlRequests.add('local', 'rship3', 'answer', { answer: 'yes' });
    control.deps.stores.controlRequests.add('local', 'rother', 'answer', { answer: 'no' });
    const items: ControlItem[] = [];
    await createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }, (i) => items.push(i)).flush();
    assert.deepEqual(items.map((i) => [i.run, i.action, i.answer]), [['rship3', 'stop', undefined], ['rship3', 'answer', 'yes']]);
    assert.deepEqual(control.deps.stores.controlRequests.pending('local').map((p) => p.run), ['rother'], "kept for rother's own worker");
  });

  it('lets a run shipped from a registered project on this machine be retried and verified', async () => {
    const project = join(root, 'registered');
    mkdirSync(join(project, '.git'), { recursive: true });
    assert.equal((await control.request('POST', '/v1/import', { body: { path: project } })).status, 200);
    await createShipper(runFolder(project, 'rship4', 'succeeded'), { SVC_CONTROL_URL: control.url, HOME: root }).flush();
    const refusals = (await control.request('GET', '/v1/runs/local/rship4')).json.refusals;
    assert.equal(refusals.retry, null);
    assert.equal(refusals.verify, null);
  });

  it('keeps Retry refused for a run shipped from a project nobody registered, naming the import', async () => {
    const project = join(root, 'unregistered');
    mkdirSync(join(project, '.git'), { recursive: true });
    await createShipper(runFolder(project, 'rship5', 'succeeded'), { SVC_CONTROL_URL: control.url, HOME: root }).flush();
    assert.equal(control.deps.stores.runs.get('local', 'rship5')?.repo_path, null);
    const refusals = (await control.request('GET', '/v1/runs/local/rship5')).json.refusals;
    assert.match(refusals.retry, /import its project \(POST \/v1\/import\)/);
  });

  it('does not bring back a run deleted on the Control Plane when it is shipped again', async () => {
    const dir = runFolder(root, 'rship6', 'succeeded');
    openEventLog(dir).append('log', { stream: 'stdout', text: 'x' });
    assert.equal(await createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }).flush(), null);
    assert.equal((await control.request('DELETE', '/v1/runs/local/rship6')).status, 200);
    // `svc ship --all` forgets the offsets and sends state, events and artifacts again.
    rmSync(join(dir, 'ship.json'));
    assert.equal(await createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: root }).flush(), null);
    assert.equal((await control.request('GET', '/v1/runs/local/rship6')).status, 404);
    assert.equal(control.deps.stores.events.listAll({ source: 'local', run: 'rship6', after: 0, limit: 10 }).length, 0);
  });

  it('removes no file through a link the repository commits at .svc/ship-pending once a run is shipped', async () => {
    const project = join(root, 'pending-link');
    const elsewhere = join(root, 'pending-elsewhere');
    mkdirSync(join(project, '.svc', 'runs'), { recursive: true });
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, 'rship7'), 'operator data\n');
    symlinkSync(elsewhere, join(project, '.svc', 'ship-pending'));
    renameSync(runFolder(root, 'rship7', 'succeeded'), runDir(project, 'rship7'));
    const shipped = await shipRuns(project, ['rship7'], { SVC_CONTROL_URL: control.url, HOME: root });
    assert.deepEqual(shipped.shipped, ['rship7'], JSON.stringify(shipped.failures));
    assert.equal(readFileSync(join(elsewhere, 'rship7'), 'utf8'), 'operator data\n');
  });
});

// A pod's run container (SVC_SIGN_LATER=1) ships with a `bound-runs` token, which may not say what only the pod's
// signer says (ingest refuses the whole batch): what its agent wrote of that in the run folder is left out, not the
// rest of the run with it (its events, and the stop requests its batches' answers carry).
describe("a pod's run container's shipper", () => {
  const MAIN = 'main-token-0123456789abcdefghijkl';
  const RUN_TOKEN = 'k8s-run-container-token-0123456789ab';
  const KEY = 'K'.repeat(43);
  let control: TestControl;
  let root: string;
  before(async () => {
    control = await startTestControl({ token: MAIN, settings: { runnerTokens: [
      { source: 'local', token: RUN_TOKEN, boundRuns: true },
    ] } });
    root = mkdtempSync(join(tmpdir(), 'svc-'));
  });
  after(async () => {
    await control.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('leaves out a success, verdict, PR, receipt or pr line, receipt.json or egress.jsonl; ships the rest', async () => {
    const dir = runFolder(root, 'rpodship');
    const t = new Date().toISOString();
    const seal = { source: 'local', runs: [{ run: 'rpodship', status: 'queued', started_at: t, run_key: KEY }] };
    assert.equal((await control.request('POST', '/v1/ingest', { token: MAIN, body: seal })).status, 200);
    makeRunKey(dir, KEY);
    const log = openEventLog(dir);
    log.append('log', { stream: 'stdout', text: 'working' });
    log.append('receipt', { verdict: 'verified', integrity: 'sha256:forged' });
    log.append('pr', { url: 'https://github.com/o/r/pull/666' });
    log.append('log', { stream: 'stdout', text: 'done' });
    writeFileSync(join(dir, 'artifacts', 'receipt.json'), '{"verdict":"verified"}\n');
    writeFileSync(join(dir, 'artifacts', 'egress.jsonl'), '{"host":"api.example","decision":"allowed"}\n');
    writeFileSync(join(dir, 'artifacts', 'provider.log'), 'hello\n');
    const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'));
    const claims = { status: 'succeeded', verdict: 'verified', pr_url: 'https://github.com/o/r/pull/666' };
    const updated_at = new Date().toISOString();
    writeFileSync(join(dir, 'state.json'), JSON.stringify({ ...state, updated_at, ...claims }));
    const env = { SVC_CONTROL_URL: control.url, HOME: root, SVC_CONTROL_TOKEN: RUN_TOKEN, SVC_SIGN_LATER: '1' };
    const skipped: string[] = [];
    assert.equal(await createShipper(dir, env, undefined, (entry) => skipped.push(entry)).flush(), null);
    const row = control.deps.stores.runs.get('local', 'rpodship');
    assert.deepEqual([row?.status, row?.verdict, row?.pr_url], ['running', null, null]);
    const stored = control.deps.stores.events.listAll({ source: 'local', run: 'rpodship', after: 0, limit: 50 });
    assert.deepEqual(stored.map((e) => e.kind), ['log', 'log']);
    const detail = (await control.request('GET', '/v1/runs/local/rpodship', { token: MAIN })).json;
    assert.deepEqual(detail.artifacts.map((a: { path: string }) => a.path), ['provider.log']);
    assert.deepEqual(skipped.sort(), ['artifacts only the signer writes', 'events.jsonl lines only the signer writes',
      'state.json fields only the signer sets']);
  });
});

describe('the run key the shipper sends (docs/control-data.md, "Each run\u2019s own runner")', () => {
  let control: TestControl;
  let repo: TestRepo;
  before(async () => {
    control = await startTestControl();
    repo = makeRepo();
  });
  after(async () => {
    await control.close();
    repo.cleanup();
  });

  it('is made with each run, readable by its owner only, and binds the run on the Control Plane to it', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: control.url };
    const { state } = await prepareRun({ input: 'a brief', forceBrief: true, pr: false, worktree: true, provider: 'fake', repo: repo.repo, runId: null, env });
    const dir = runDir(repo.repo, state.run);
    assert.equal(statSync(join(dir, RUN_KEY_FILE)).mode & 0o777, 0o600);
    const key = readFileSync(join(dir, RUN_KEY_FILE), 'utf8').trim();
    assert.match(key, /^[A-Za-z0-9_-]{43}$/);
    assert.throws(() => makeRunKey(dir), /EEXIST/, 'a key already made is never replaced');
    assert.equal(await createShipper(dir, env).flush(), null);
    const bound = control.deps.db.prepare('SELECT run_key_sha256 AS d FROM runs WHERE run = ?').get(state.run) as { d: Uint8Array };
    assert.deepEqual(Buffer.from(bound.d), createHash('sha256').update(key).digest());
  });

  it('is the key a Control Plane handed the launcher (SVC_RUN_KEY) when there is one, checked and never echoed', async () => {
    const handed = 'handed-key-0123456789abcdefghijklmnopqrstuvwxyz';
    const env: NodeJS.ProcessEnv = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_RUN_KEY: handed };
    const made = (runId: string, e: NodeJS.ProcessEnv) => prepareRun({ input: 'a brief', forceBrief: true, pr: false, worktree: true, provider: 'fake', repo: repo.repo, runId, env: e });
    const { state } = await made('rhanded1', env);
    assert.equal(readFileSync(join(runDir(repo.repo, state.run), RUN_KEY_FILE), 'utf8'), `${handed}\n`);
    const bad = 'not a key but a secret all the same';
    await assert.rejects(made('rhanded2', { ...env, SVC_RUN_KEY: bad }),
      (e: Error) => e.message === 'SVC_RUN_KEY must be 32 to 128 letters, digits, "_" or "-"');
    assert.equal(existsSync(runDir(repo.repo, 'rhanded2')), false, 'nothing was made');
  });

  it('keeps another folder of the same run out, 403 forbidden_run, and loses nothing it had not sent', async () => {
    const dir = runFolder(repo.root, 'rkey1');
    makeRunKey(dir);
    assert.equal(await createShipper(dir, { SVC_CONTROL_URL: control.url, HOME: repo.home }).flush(), null);
    const other = runFolder(join(repo.root, 'elsewhere'), 'rkey1');
    makeRunKey(other);
    openEventLog(other).append('log', { stream: 'stdout', text: 'from another pod' });
    const failure = await createShipper(other, { SVC_CONTROL_URL: control.url, HOME: repo.home }).flush();
    assert.equal(failure?.everyRun, false, 'a refusal of this run alone');
    assert.match(failure?.why ?? '', /^the Control Plane at \S+ answered 403 forbidden_run \(Run local\/rkey1 is bound to the key of the runner that made it; this batch carries another "run_key"/);
    assert.equal(existsSync(join(other, 'ship.json')), false, 'its offsets stay where they were');
    assert.equal(control.deps.stores.events.listAll({ source: 'local', run: 'rkey1', after: 0, limit: 10 }).length, 0);
  });

  it('holds back no other run when one is refused: svc ship sends the rest and names each run it could not send', async () => {
    const runs = join(repo.repo, '.svc', 'runs');
    const taken = runFolder(join(repo.root, 'taken'), 'rmany1');
    makeRunKey(taken);
    assert.equal(await createShipper(taken, { SVC_CONTROL_URL: control.url, HOME: repo.home }).flush(), null);
    for (const run of ['rmany1', 'rmany2', 'rmany3']) makeRunKey(runFolder(runs, run));
    const env = { SVC_CONTROL_URL: control.url, HOME: repo.home };
    const result = await shipRuns(repo.repo, ['rmany1', 'rmany2', 'rmany3'], env);
    assert.deepEqual(result.shipped, ['rmany2', 'rmany3']);
    assert.deepEqual(result.left, ['rmany1']);
    assert.deepEqual(result.failures.map((f) => f.run), ['rmany1']);
    assert.match(result.failures[0]!.why, /answered 403 forbidden_run \(Run local\/rmany1 is bound/);
    for (const run of ['rmany2', 'rmany3']) assert.equal(control.deps.stores.runs.get('local', run)?.run, run);
  });
});

/** Whatever SVC_CONTROL_URL points at (a Control Plane, or the dashboard, the trigger, a proxy): it answers each
 * request with `answer` as it is then, and counts them. It listens, with a temp HOME (`root`) beside it, from the
 * describe's before() to its after(). */
function standInForSuite() {
  const stand = { answer: { status: 200, body: '' }, requests: 0, url: '', root: '', onRequest: () => {} };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      stand.requests++;
      stand.onRequest();
      res.writeHead(stand.answer.status, { 'content-type': 'application/json' }).end(stand.answer.body);
    });
  });
  before(async () => {
    stand.root = mkdtempSync(join(tmpdir(), 'svc-'));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    stand.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise<void>((done) => server.close(() => done()));
    rmSync(stand.root, { recursive: true, force: true });
  });
  return stand;
}

describe('which failure ends a pass of shipRuns (svc ship, the pending runs before a command)', () => {
  const stand = standInForSuite();

  /** Two runs of a fresh project, each marked to be sent, shipped while the server answers `status` `code`. */
  async function shipTwo(status: number, code: string | null) {
    const body = code ? JSON.stringify({ error: { code, message: 'no' } }) : '<html>a dashboard</html>';
    stand.answer = { status, body };
    const project = mkdtempSync(join(stand.root, 'p-'));
    mkdirSync(join(project, '.svc', 'ship-pending'), { recursive: true });
    for (const run of ['rpass1', 'rpass2']) {
      runFolder(join(project, '.svc', 'runs'), run);
      writeFileSync(join(project, '.svc', 'ship-pending', run), '');
    }
    const result = await shipRuns(project, ['rpass1', 'rpass2'], { SVC_CONTROL_URL: stand.url, HOME: stand.root });
    const marked = ['rpass1', 'rpass2'].filter((run) => existsSync(join(project, '.svc', 'ship-pending', run)));
    return { ...result, marked };
  }

  for (const [status, code] of [
    [404, 'not_found'], [405, 'method_not_allowed'], [408, 'request_timeout'], [403, 'forbidden_host'],
    [403, 'loopback_only'], [403, 'proxied_request'], [403, 'forbidden_origin'], [403, 'forbidden_source'],
    [400, 'invalid_json'], [401, 'unauthorized'], [429, 'too_many_requests'], [503, 'unavailable'], [200, null],
  ] as const) {
    it(`ends the pass at ${status} ${code ?? '(not JSON)'}, which every run would meet, keeping markers`, async () => {
      const result = await shipTwo(status, code);
      assert.deepEqual(result.failures.map((f) => [f.run, f.everyRun]), [['rpass1', true]]);
      assert.deepEqual(result.left, ['rpass1', 'rpass2']);
      assert.deepEqual(result.marked, ['rpass1', 'rpass2']);
    });
  }

  for (const [status, code] of [[403, 'forbidden_run'], [400, 'invalid_param'], [400, 'bad_request'],
    [413, 'payload_too_large']] as const) {
    it(`goes on past ${status} ${code}, a refusal of that run's batch, and drops each refused marker`, async () => {
      const result = await shipTwo(status, code);
      assert.deepEqual(result.failures.map((f) => [f.run, f.everyRun]), [['rpass1', false], ['rpass2', false]]);
      assert.match(result.failures[0]!.why, new RegExp(`answered ${status} ${code} \\(no\\)`));
      assert.deepEqual(result.marked, []);
    });
  }
});

// A worker's last ship (createShipLoop's close) tries three times in its budget. When the budget runs out after a
// Control Plane answered, what it answered is the reason said, with the budget's end after it: not the budget alone.
describe("a last ship whose budget runs out after the Control Plane answered", () => {
  const stand = standInForSuite();

  it("says the last answer's reason (a 503's), and that the budget ran out", async () => {
    stand.answer = { status: 503, body: JSON.stringify({ error: { code: 'unavailable', message: 'draining now' } }) };
    const project = mkdtempSync(join(stand.root, 'p-'));
    const dir = runFolder(join(project, '.svc', 'runs'), 'rlast1');
    const said: string[] = [];
    const shipper = createShipper(dir, { SVC_CONTROL_URL: stand.url, HOME: stand.root });
    // A budget shorter than the three tries' pauses (250 ms, then 1 s): it runs out after at least one answer.
    const loop = createShipLoop(shipper, dir, (text) => said.push(text), 1_000);
    await loop.close();
    assert.ok(stand.requests > 0, 'the Control Plane was asked');
    assert.equal(said.length, 1);
    assert.match(said[0]!,
      /^not shipped: .*answered 503 unavailable \(draining now\), then a last ship's 1 s ran out;/);
    assert.ok(existsSync(join(project, '.svc', 'ship-pending', 'rlast1')), 'left for the next svc command');
  });
});

// A Control Plane's answer is read through typed readers (src/untrusted.ts): a broken or hostile one (a proxy, another
// server at the URL) neither crashes the shipper nor tells it of a deletion or a request it did not list.
describe("the shipper reads the Control Plane's answer to a batch as untrusted", () => {
  const stand = standInForSuite();
  const ingested = (answer: object) =>
    ({ status: 200, body: JSON.stringify({ runs: 1, events: 0, duplicates: 0, artifacts: 0, ...answer }) });

  const answers: Array<[string, object]> = [
    ['an object with its own includes as deleted, and an object as control',
      { deleted: { includes: 1 }, control: { length: 1, 0: { run: 'ranswer', action: 'stop' } } }],
    ['a text naming the run as deleted, and requests without a run or an action as control',
      { deleted: 'not ranswer', control: [null, 'stop', { run: 'ranswer' }, { run: 'ranswer', action: 1 }, [1]] }],
  ];
  for (const [i, [what, answer]] of answers.entries()) {
    it(`takes no deletion and no request from ${what}, and ships on`, async () => {
      stand.answer = ingested(answer);
      const dir = runFolder(join(stand.root, `hostile-${i}`), 'ranswer');
      const items: ControlItem[] = [];
      const shipper = createShipper(dir, { SVC_CONTROL_URL: stand.url, HOME: stand.root }, (item) => items.push(item));
      stand.requests = 0;
      assert.equal(await shipper.flush(), null);
      assert.equal(await shipper.flush(), null);
      assert.deepEqual(items, []);
      assert.equal(stand.requests, 2, 'a run not deleted is shipped again');
    });
  }

  it('hands over the requests that name a run and an action, and a deletion the list names', async () => {
    stand.answer = ingested({ deleted: ['ranswer'],
      control: [{ run: 'ranswer', action: 'answer', answer: 'yes' }, { run: 'ranswer', action: null }] });
    const items: ControlItem[] = [];
    const dir = runFolder(join(stand.root, 'listed'), 'ranswer');
    await createShipper(dir, { SVC_CONTROL_URL: stand.url, HOME: stand.root }, (item) => items.push(item)).flush();
    assert.deepEqual(items, [
      { run: 'ranswer', action: 'answer', answer: 'yes' }, { run: 'ranswer', action: 'deleted' },
    ]);
  });
});

/** The token svc's commands send to `found` (control-url.ts, the one rule). */
const readControlToken = (env: NodeJS.ProcessEnv, found: ControlFound) => controlToken(env, found).token;

describe('the Control Plane token a client sends', () => {
  it("never sends this machine's own token file to a remote Control Plane (SVC_CONTROL_URL or --url elsewhere)", () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-token-'));
    try {
      mkdirSync(join(home, '.svc', 'control'), { recursive: true });
      writeFileSync(join(home, '.svc', 'control', 'token'), 'own-local-token\n');
      const env = { HOME: home };
      const named = (url: string) => ({ url, via: 'SVC_CONTROL_URL' as const });
      assert.equal(readControlToken(env, named('http://127.0.0.1:47999')), 'own-local-token');
      assert.equal(readControlToken(env, named('http://[::1]:47999')), 'own-local-token');
      assert.equal(readControlToken(env, named('https://control.example.test')), undefined);
      // What the operator named for any Control Plane still goes.
      const remote = named('https://control.example.test');
      assert.equal(readControlToken({ ...env, SVC_CONTROL_TOKEN: 'named' }, remote), 'named');
      writeFileSync(join(home, 'named-file'), 'from-file\n');
      assert.equal(readControlToken({ ...env, SVC_CONTROL_TOKEN_FILE: join(home, 'named-file') }, remote), 'from-file');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('the home token and a port no live Control Plane is known to hold', () => {
  let home: string;
  before(() => {
    home = mkdtempSync(join(tmpdir(), 'svc-token-'));
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    writeFileSync(join(home, '.svc', 'control', 'token'), 'own-local-token\n');
  });
  after(() => rmSync(home, { recursive: true, force: true }));

  it('is not sent to the default port found when no Control Plane runs (anyone may listen there)', () => {
    // Nothing is contacted: only the token the client would send is looked at.
    assert.equal(shipperClient({ HOME: home }).token, undefined);
    const url = 'http://127.0.0.1:47999';
    const port = { HOME: home, SVC_CONTROL_PORT: '47999' };
    assert.equal(readControlToken(port, { url, via: 'SVC_CONTROL_PORT' }), 'own-local-token');
    assert.equal(readControlToken({ HOME: home }, { url, via: 'SVC_CONTROL_URL' }), 'own-local-token');
    assert.equal(readControlToken({ HOME: home }, { url, via: '--url' }), 'own-local-token');
    // A token file named goes where it is named, even the home file.
    const named = { HOME: home, SVC_CONTROL_TOKEN_FILE: join(home, '.svc', 'control', 'token') };
    assert.equal(shipperClient(named).token, 'own-local-token');
  });

  it('goes to an older svc\'s server.json (no start time) only while its pid is this user\'s control serve',
    async () => {
      // Nothing is contacted: only where discovery points and the token the client would send are looked at.
      const url = 'http://127.0.0.1:47998';
      const recordFile = join(home, '.svc', 'control', 'server.json');
      let sleeper: ChildProcess | undefined;
      let serve: ChildProcess | undefined;
      try {
        sleeper = await idleNode();
        serve = await idleNode(['control', 'serve']);
        // A pid held by another program (here an idle node; on a shared host, another user's) names no Control Plane.
        writeFileSync(recordFile, JSON.stringify({ url, pid: sleeper.pid }));
        const reused = shipperClient({ HOME: home });
        assert.deepEqual([reused.via, reused.token], ['default', undefined]);
        writeFileSync(recordFile, JSON.stringify({ url, pid: serve.pid }));
        const live = shipperClient({ HOME: home });
        assert.deepEqual([live.url, live.via, live.token], [url, 'server.json', 'own-local-token']);
      } finally {
        sleeper?.kill('SIGKILL');
        serve?.kill('SIGKILL');
        rmSync(recordFile, { force: true });
      }
    });

  it('goes to the URL a live server.json names, not once that server is gone and the port taken', async () => {
    const seen: (string | undefined)[] = [];
    const squatter = createServer((req, res) => {
      seen.push(req.headers.authorization);
      req.resume();
      req.on('end', () => res.writeHead(401, { 'content-type': 'application/json' })
        .end('{"error":{"code":"unauthorized","message":"no"}}'));
    });
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    // The Control Plane server.json records (a process standing in for it), on the port the squatter will hold.
    const server = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      const url = `http://127.0.0.1:${(squatter.address() as AddressInfo).port}`;
      const start = readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19];
      const record = { url, pid: server.pid, proc_start: start };
      writeFileSync(join(home, '.svc', 'control', 'server.json'), JSON.stringify(record));
      const shipper = createShipper(runFolder(home, 'rlive'), { HOME: home });
      await shipper.flush();
      server.kill('SIGKILL');
      await once(server, 'exit');
      const failure = await shipper.flush();
      assert.deepEqual(seen, ['Bearer own-local-token', undefined]);
      assert.match(failure?.why ?? '', /needs a token/);
    } finally {
      server.kill('SIGKILL');
      squatter.close();
    }
  });
});

// A person may delete a run while its batch is on the way: what the shipper writes after (ship.json) must not make the
// folder again, holding that one file.
describe('a run folder removed while its batch is sent', () => {
  const stand = standInForSuite();

  it('stays removed: the shipper writes no ship.json into a folder it would have to make', async () => {
    stand.answer = { status: 200, body: JSON.stringify({ runs: 1, events: 0, duplicates: 0, artifacts: 0 }) };
    const dir = runFolder(join(stand.root, 'removed'), 'rgone');
    stand.onRequest = () => rmSync(dir, { recursive: true, force: true });
    const shipper = createShipper(dir, { SVC_CONTROL_URL: stand.url, HOME: stand.root });
    assert.equal(await shipper.flush(), null);
    assert.equal(existsSync(dir), false);
    assert.equal(stand.requests, 1);
  });
});

describe('a Control Plane address that redirects', () => {
  it('fails the ship naming the 307, and sends neither the token nor the run to where it points', async () => {
    const pair = await startRedirectPair(307);
    const root = mkdtempSync(join(tmpdir(), 'svc-'));
    try {
      const dir = runFolder(join(root, 'redirected'), 'rredir');
      const env = { SVC_CONTROL_URL: pair.url, SVC_CONTROL_TOKEN: 'tok-not-for-there', HOME: root };
      const failure = await createShipper(dir, env).flush();
      assert.match(failure?.why ?? '', new RegExp(`the Control Plane at ${pair.url} answered 307 redirected`));
      assert.equal(failure?.why.includes('tok-not-for-there'), false);
      assert.deepEqual(pair.reached, []);
      assert.equal(existsSync(join(dir, 'ship.json')), false, 'nothing counts as shipped');
    } finally {
      await pair.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

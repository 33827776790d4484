// The pieces the pod signer trusts instead of the run container's word (src/pod/): hash-checked commits, a copy of
// the run folder that follows no link, the base commit's policy, and a typed reading of the evidence.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync,
  writeFileSync, renameSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { verifyCommits, policyAt, signerGit, UnverifiableError } from '../../src/pod/verified-commits.ts';
import { readEvidence, EvidenceError, type Receipt } from '../../src/engine/receipt.ts';
import { reconcileChecks, signRun } from '../../src/pod/sign.ts';
import { copyRunFolder } from '../../src/pod/copied-run.ts';
import { git as svcGit } from '../../src/engine/git.ts';
import { FailedError } from '../../src/errors.ts';
import { writeSeal, readSeal, storeRun } from '../../src/pod/seal.ts';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULT_POLICY } from '../../src/engine/policy.ts';
import { newRunKey } from '../../src/engine/ids.ts';
import { startTestControl } from '../helpers/control-server.ts';

const GIT_ENV = { GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 'T', GIT_COMMITTER_EMAIL: 't@x' };
const root = mkdtempSync(join(tmpdir(), 'svc-pod-'));

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } }).trim();
}

/** A workspace like a pod's: a shallow clone of origin, a run commit on svc/<run> on top of the sealed base. */
function workspace(name: string): { ws: string; base: string; head: string } {
  const origin = join(root, `${name}-origin`);
  mkdirSync(origin);
  git(origin, ['init', '-q', '-b', 'main']);
  for (const i of [1, 2, 3]) {
    writeFileSync(join(origin, `f${i}.txt`), `${i}\n`);
    if (i === 3) {
      mkdirSync(join(origin, '.svc'));
      writeFileSync(join(origin, '.svc', 'policy.json'), JSON.stringify({ checks: [{ name: 'test', run: ['true'] }] }));
    }
    git(origin, ['add', '-A']);
    git(origin, ['commit', '-qm', `c${i}`]);
  }
  const ws = join(root, `${name}-ws`);
  git(root, ['clone', '-q', '--depth', '2', `file://${origin}`, ws]);
  const base = git(ws, ['rev-parse', 'HEAD']);
  git(ws, ['checkout', '-qb', 'svc/r1']);
  writeFileSync(join(ws, 'f1.txt'), '1\nfixed\n');
  git(ws, ['commit', '-qam', 'agent']);
  return { ws, base, head: git(ws, ['rev-parse', 'HEAD']) };
}

function objectPath(ws: string, sha: string): string {
  return join(ws, '.git', 'objects', sha.slice(0, 2), sha.slice(2));
}

// A Control Plane that takes every batch and sends nothing back (but `storedSeq`, the highest event seq it says it
// stored, and a stop asked when `stopAsked`): the signer does not go on without its move's answer.
let storedSeq = 0;
let stopAsked = false;
const control = createHttpServer((req, res) => {
  req.resume();
  res.writeHead(200, { 'content-type': 'application/json' });
  const stop = stopAsked ? { stop_asked: ['r1'] } : {};
  res.end(JSON.stringify(storedSeq ? { ...stop, last_seq: [{ run: 'r1', seq: storedSeq }] } : stop));
});
let controlUrl = '';
before(async () => {
  await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
  controlUrl = `http://127.0.0.1:${(control.address() as AddressInfo).port}`;
});
after(() => {
  control.close();
  rmSync(root, { recursive: true, force: true });
});

const GITLINK_BEFORE = '1'.repeat(40);
const GITLINK_AFTER = '2'.repeat(40);

/** A workspace whose base has a submodule at vendor/lib; the run's commit edits README.md and moves the submodule. */
function submoduleWorkspace(name: string): { ws: string; base: string; head: string } {
  const origin = join(root, `${name}-origin`);
  mkdirSync(origin);
  git(origin, ['init', '-q', '-b', 'main']);
  writeFileSync(join(origin, 'README.md'), 'readme\n');
  git(origin, ['add', '-A']);
  git(origin, ['update-index', '--add', '--cacheinfo', `160000,${GITLINK_BEFORE},vendor/lib`]);
  git(origin, ['commit', '-qm', 'base with a submodule']);
  const ws = join(root, `${name}-ws`);
  git(root, ['clone', '-q', '--depth', '1', `file://${origin}`, ws]);
  const base = git(ws, ['rev-parse', 'HEAD']);
  git(ws, ['checkout', '-qb', 'svc/r1']);
  writeFileSync(join(ws, 'README.md'), 'readme\nand a note\n');
  git(ws, ['add', 'README.md']);
  git(ws, ['update-index', '--cacheinfo', `160000,${GITLINK_AFTER},vendor/lib`]);
  git(ws, ['commit', '-qm', 'agent']);
  return { ws, base, head: git(ws, ['rev-parse', 'HEAD']) };
}

/** What a pod leaves the signer: the run folder in the workspace (state and evidence) and the seal of the base. */
async function signPod(
  name: string, w: { ws: string; base: string; head: string },
  more: { state?: object; env?: object; evidence?: false; sealedAt?: string; originUrl?: string } = {},
): Promise<Receipt | null> {
  const run = 'r1';
  const dir = join(w.ws, '.svc', 'runs', run);
  mkdirSync(join(dir, 'artifacts'), { recursive: true });
  const state = {
    run, source: 'k8s', status: 'running', head_sha: w.head, provider: 'command', started_at: 'x', ...more.state,
  };
  writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
  const check = { name: 'test', argv: ['true'], required: true, exit_code: 0, duration_ms: 1, output_sha256: '' };
  const evidence = { type: 'svc.run_evidence', version: 1, run, outcome: 'finished', error: null, exit_code: 0 };
  if (more.evidence !== false) {
    writeFileSync(join(dir, 'artifacts', 'evidence.json'), JSON.stringify({ ...evidence, checks: [check] }));
  }
  const sealedDir = join(root, `${name}-sealed`);
  mkdirSync(sealedDir);
  const seal = {
    base_sha: w.base, origin_url: more.originUrl ?? null, origin_problem: more.originUrl ? null : 'none',
    base_branch: 'main', sealed_at: more.sealedAt ?? 'x',
  };
  writeFileSync(join(sealedDir, 'seal.json'), JSON.stringify(seal));
  writeFileSync(join(sealedDir, 'run-key'), `${newRunKey()}\n`, { mode: 0o600 });
  const home = join(root, `${name}-signer-home`);
  mkdirSync(home);
  const env = { PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl, SVC_SHIP: '0', ...more.env };
  await signRun({ run, source: 'k8s', workspace: w.ws, sealedDir, pr: false, env, say: () => {} });
  const receipt = join(home, 'work', '.svc', 'runs', run, 'artifacts', 'receipt.json');
  return existsSync(receipt) ? JSON.parse(readFileSync(receipt, 'utf8')) as Receipt : null;
}

describe('the signer signs what is pushed', () => {
  it('lists a submodule the run moved beside the file it edited, and hashes a patch that carries the move', async () => {
    const w = submoduleWorkspace('submodule');
    const v = verifyCommits(w.ws, join(root, 'submodule-scratch'), w.base, w.head, 'svc/r1');
    assert.deepEqual(v.diff.files.map((f) => f.path), ['README.md', 'vendor/lib']);
    assert.match(v.diff.patch, new RegExp(`^-Subproject commit ${GITLINK_BEFORE}$`, 'm'));
    assert.match(v.diff.patch, new RegExp(`^\\+Subproject commit ${GITLINK_AFTER}$`, 'm'));
    const receipt = await signPod('submodule-sign', submoduleWorkspace('submodule-sign'));
    assert.deepEqual(receipt?.diff.paths, ['README.md', 'vendor/lib']);
    assert.equal(receipt?.diff.files, 2);
  });

  it("signs the job's trace id from the pod spec, never the one the run container's state names", async () => {
    const job = 'a'.repeat(32);
    const forged = { state: { trace_id: 'b'.repeat(32) } };
    const env = { SVC_TRACEPARENT: `00-${job}-${'c'.repeat(16)}-01` };
    const receipt = await signPod('trace', workspace('trace'), { ...forged, env });
    assert.equal(receipt?.trace_id, job);
    assert.equal((await signPod('no-trace', workspace('no-trace'), forged))?.trace_id, undefined);
  });

  it('ships the diff it made, whatever the run container wrote of its own diff or of what was shipped', async () => {
    const w = workspace('own-diff');
    const dir = join(w.ws, '.svc', 'runs', 'r1');
    mkdirSync(join(dir, 'artifacts'), { recursive: true });
    // The agent's word: a harmless diffstat, and a ship.json saying everything the signer will make was shipped.
    const fake = JSON.stringify({ files: [{ path: 'docs/typo.md', insertions: 1, deletions: 0 }] });
    writeFileSync(join(dir, 'artifacts', 'diffstat.json'), fake);
    writeFileSync(join(dir, 'artifacts', 'diff.patch'), 'fake patch\n');
    writeFileSync(join(dir, 'ship.json'), JSON.stringify({ events_offset: 1e9, artifacts: { 'diffstat.json': 'x' } }));
    const receipt = await signPod('own-diff', w);
    const signed = join(root, 'own-diff-signer-home', 'work', '.svc', 'runs', 'r1');
    const diffstat = JSON.parse(readFileSync(join(signed, 'artifacts', 'diffstat.json'), 'utf8'));
    assert.deepEqual(diffstat.files.map((f: { path: string }) => f.path), ['f1.txt']);
    assert.equal(diffstat.patch_sha256, receipt?.diff.patch_sha256);
    assert.match(readFileSync(join(signed, 'artifacts', 'diff.patch'), 'utf8'), /^\+fixed$/m);
    const shipFile = join(signed, 'ship.json');
    const shipped = existsSync(shipFile) ? JSON.parse(readFileSync(shipFile, 'utf8')) : {};
    assert.notEqual(shipped.events_offset, 1e9, 'the agent\'s offsets are not the signer\'s');
  });

  it('ships an empty diff over the run container\'s when it ends without signing the commits', async () => {
    const ends = [['unverified-diff', 'commits', 'failed'], ['no-evidence-diff', 'evidence', 'failed'],
      ['stop-diff', 'stop', 'stopped']];
    for (const [name, end, status] of ends) {
      const w = workspace(name!);
      const dir = join(w.ws, '.svc', 'runs', 'r1');
      mkdirSync(join(dir, 'artifacts'), { recursive: true });
      writeFileSync(join(dir, 'artifacts', 'diffstat.json'), JSON.stringify({ files: [{ path: 'docs/typo.md' }] }));
      writeFileSync(join(dir, 'artifacts', 'diff.patch'), 'fake patch\n');
      const more = end === 'commits' ? { state: { head_sha: 'f'.repeat(40) } } : { evidence: false as const };
      stopAsked = end === 'stop';
      const receipt = await signPod(name!, w, end === 'stop' ? {} : more).finally(() => (stopAsked = false));
      assert.equal(receipt?.verdict ?? 'none', end === 'commits' ? 'not_verified' : 'none');
      const signed = join(root, `${name}-signer-home`, 'work', '.svc', 'runs', 'r1', 'artifacts');
      assert.deepEqual(JSON.parse(readFileSync(join(signed, 'diffstat.json'), 'utf8')).files, [], name);
      assert.equal(readFileSync(join(signed, 'diff.patch'), 'utf8'), '', name);
      assert.equal(JSON.parse(readFileSync(join(signed, '..', 'state.json'), 'utf8')).status, status, name);
    }
  });

  // The run container (the agent) may ship seqs its events.jsonl does not hold, or one over the copy's cap: the
  // signer's events stored at those seqs would be dropped as duplicates.
  it('numbers its events after the highest seq the Control Plane stored for the run', async () => {
    const w = workspace('stored-seq');
    const dir = join(w.ws, '.svc', 'runs', 'r1');
    mkdirSync(dir, { recursive: true });
    const line = { seq: 3, ts: new Date().toISOString(), kind: 'note', data: {} };
    writeFileSync(join(dir, 'events.jsonl'), `${JSON.stringify(line)}\n`);
    storedSeq = 5000;
    try {
      assert.equal((await signPod('stored-seq', w))?.verdict, 'verified');
    } finally {
      storedSeq = 0;
    }
    const log = join(root, 'stored-seq-signer-home', 'work', '.svc', 'runs', 'r1', 'events.jsonl');
    const events = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { seq: number });
    assert.deepEqual(events.slice(1).filter((e) => e.seq <= 5000), []);
    assert.equal(events[1]?.seq, 5001);
    storedSeq = Number.MAX_SAFE_INTEGER - 10;
    try {
      await assert.rejects(signPod('unsafe-seq', workspace('unsafe-seq')), { name: 'RefusedError' });
    } finally {
      storedSeq = 0;
    }
  });

  // The copied events.jsonl is the agent's: a seq there too high for the signer's leaves no room, as a stored one.
  it('refuses a run whose copied events.jsonl holds a seq with no room after it', async () => {
    const w = workspace('copied-seq');
    mkdirSync(join(w.ws, '.svc', 'runs', 'r1'), { recursive: true });
    const line = { seq: Number.MAX_SAFE_INTEGER, ts: new Date().toISOString(), kind: 'note', data: {} };
    writeFileSync(join(w.ws, '.svc', 'runs', 'r1', 'events.jsonl'), `${JSON.stringify(line)}\n`);
    await assert.rejects(signPod('copied-seq', w), { name: 'RefusedError', message: /no room/ });
  });

  // The signer ships the copied events.jsonl from its start, and the copied artifacts: one line or one artifact name
  // ingest refuses would refuse every batch of it. Its shipper leaves such lines and names out (engine/run-event.ts
  // eventRefusal, isArtifactPath) and ships the rest.
  it("ships its receipt and status to a real Control Plane past the agent's event lines and artifact names ingest " +
    'refuses', async () => {
    const cp = await startTestControl();
    try {
      const w = workspace('bad-lines');
      mkdirSync(join(w.ws, '.svc', 'runs', 'r1', 'artifacts'), { recursive: true });
      writeFileSync(join(w.ws, '.svc', 'runs', 'r1', 'artifacts', 'a\\b.txt'), 'agent-named\n');
      const ts = new Date().toISOString();
      const deep = JSON.stringify({ seq: 6, ts, kind: 'note', data: JSON.parse(`${'['.repeat(62)}${']'.repeat(62)}`) });
      const lines = ['{"seq":1e999,"kind":"note"}', '"a string"', 'not json', '{"seq":-1,"kind":"note"}',
        JSON.stringify({ seq: 2, ts, kind: 'bad kind!' }), JSON.stringify({ seq: 3, ts: '9999-01-01', kind: 'note' }),
        JSON.stringify({ seq: 4, ts, kind: 'note', source: 'other' }), JSON.stringify({ seq: 5, ts, kind: 'note' }),
        deep, '[1]'];
      writeFileSync(join(w.ws, '.svc', 'runs', 'r1', 'events.jsonl'), `${lines.join('\n')}\n`);
      const env = { SVC_CONTROL_URL: cp.url, SVC_SOURCE: 'k8s', SVC_SHIP: '1' };
      assert.equal((await signPod('bad-lines', w, { env, sealedAt: ts }))?.verdict, 'verified');
      const run = await cp.request('GET', '/v1/runs/k8s/r1');
      assert.equal(run.json.status, 'succeeded');
      const events = (await cp.request('GET', '/v1/runs/k8s/r1/events')).json.items as Array<{ seq: number }>;
      // The one line ingest takes, then the signer's own, after every seq of the copy (the deep line's 6 too).
      assert.deepEqual(events.map((e) => e.seq), [5, ...events.slice(1).map((_, i) => i + 7)]);
      assert.ok(events.some((e) => JSON.stringify(e).includes('"to":"succeeded"')), JSON.stringify(events));
      assert.equal((await cp.request('GET', '/v1/runs/k8s/r1/artifact/receipt.json')).status, 200);
    } finally {
      await cp.close();
    }
  });

  // The signer ships its copy of events.jsonl with the sealed key, whose batches are the signer's word: a `receipt`
  // or `pr` line the agent wrote there stood in the run's history beside the signer's own (a forged verdict, a PR).
  it("ships none of the agent's receipt, pr lines or egress.jsonl; its egress and svc lines as the run container's",
    async () => {
    const cp = await startTestControl();
    try {
      const w = workspace('forged-lines');
      mkdirSync(join(w.ws, '.svc', 'runs', 'r1'), { recursive: true });
      const ts = new Date().toISOString();
      const lines = [{ seq: 1, ts, kind: 'note', data: {} },
        { seq: 2, ts, kind: 'receipt', data: { verdict: 'verified', integrity: 'sha256:forged', by: 'pod-signer' } },
        { seq: 3, ts, kind: 'pr', data: { url: 'https://github.com/o/r/pull/666' } }, { seq: 4, ts, kind: 'note' },
        { seq: 5, ts, kind: 'egress', data: { host: 'api.example', decision: 'allowed', by: 'gate' } },
        { seq: 6, ts, kind: 'log', data: { stream: 'svc', text: 'Evidence Receipt written: verified' } },
        { seq: 7, ts, kind: 'receipt', data: null }, { seq: 8, ts, kind: 'log', data: 'pull request opened' }];
      const log = lines.map((l) => `${JSON.stringify(l)}\n`).join('');
      writeFileSync(join(w.ws, '.svc', 'runs', 'r1', 'events.jsonl'), log);
      // Its egress.jsonl is no gate's record: with no shared gate the signer ships none.
      mkdirSync(join(w.ws, '.svc', 'runs', 'r1', 'artifacts'), { recursive: true });
      writeFileSync(join(w.ws, '.svc', 'runs', 'r1', 'artifacts', 'egress.jsonl'), '{"host":"api.example"}\n');
      const env = { SVC_CONTROL_URL: cp.url, SVC_SOURCE: 'k8s', SVC_SHIP: '1' };
      assert.equal((await signPod('forged-lines', w, { env, sealedAt: ts }))?.verdict, 'verified');
      type Shown = { seq: number; kind: string; data: { integrity?: string } };
      const events = (await cp.request('GET', '/v1/runs/k8s/r1/events')).json.items as Shown[];
      assert.deepEqual(events.filter((e) => e.seq <= 8).map((e) => e.seq), [1, 4, 5, 6, 8]);
      // A marked line whose data is no object keeps it, marked.
      assert.deepEqual(events.find((e) => e.seq === 8)?.data, { value: 'pull request opened', by: 'run-container' });
      // The agent's egress line is the run container's word, never the gate's evidence the signer ships; its svc line
      // is not the signer's own.
      for (const seq of [5, 6]) {
        assert.equal((events.find((e) => e.seq === seq)?.data as { by?: string }).by, 'run-container', String(seq));
      }
      const egress = await cp.request('GET', '/v1/runs/k8s/r1/artifact/egress.jsonl');
      assert.equal(egress.status, 404, egress.text);
      const receipts = events.filter((e) => e.kind === 'receipt' || e.kind === 'pr');
      assert.equal(receipts.length, 1, JSON.stringify(receipts));
      assert.notEqual(receipts[0]?.data.integrity, 'sha256:forged');
    } finally {
      await cp.close();
    }
  });

  // The signer ships the copied state.json's fields it does not set itself (brief, origin, provider, the reported
  // cost): one ingest refuses would refuse every batch of it. The group is the run's own whatever the copy says. Its
  // shipper cuts a text too long, leaves out any other such field (engine/run-event.ts runRefusal) and says so once
  // in the run's log.
  it("ships its receipt and status to a real Control Plane past the state.json fields ingest refuses", async () => {
    const cp = await startTestControl();
    try {
      const w = workspace('bad-state');
      const sealedAt = new Date().toISOString();
      const state = {
        group_id: '../other', brief: 42, origin: { webhook: true }, provider: 'p'.repeat(70_000),
        status: 'exploded', reported: { cost_usd: 0.5, tokens_in: 1.5, tokens_out: 2 ** 60 }, branch: 7,
        updated_at: '9999-01-01T00:00:00Z',
      };
      const env = { SVC_CONTROL_URL: cp.url, SVC_SOURCE: 'k8s', SVC_SHIP: '1' };
      assert.equal((await signPod('bad-state', w, { env, state, sealedAt }))?.verdict, 'verified');
      const run = (await cp.request('GET', '/v1/runs/k8s/r1')).json;
      assert.equal(run.status, 'succeeded');
      assert.equal(run.group_id, 'r1');
      assert.equal(run.provider, `${'p'.repeat(64 * 1024 - 1)}…`);
      assert.deepEqual([run.brief, run.origin, run.tokens_in, run.tokens_out], [null, null, null, null]);
      // Counts the Run JSON gives as integers: a reported count that is none is unknown.
      assert.deepEqual([run.cost_usd, run.reported], [0.5, { cost_usd: 0.5, tokens_in: null, tokens_out: null }]);
      assert.equal(run.branch, 'svc/r1');
      assert.equal((await cp.request('GET', '/v1/runs/k8s/r1/artifact/receipt.json')).status, 200);
      const events = (await cp.request('GET', '/v1/runs/k8s/r1/events')).json.items as Array<{ data: unknown }>;
      const said = events.map((e) => JSON.stringify(e.data)).filter((d) => d.includes('state.json field brief'));
      assert.equal(said.length, 1, JSON.stringify(events));
    } finally {
      await cp.close();
    }
  });

  it('names the repository, origin and branch the pod spec gave, not those of the copied state.json', async () => {
    const state = { repo: 'victim/other', origin: 'cli', branch: 'main' };
    const env = { SVC_ORIGIN: 'chatb', SVC_REPO_NAME: 'acme/app' };
    const signed = (name: string) => {
      const file = join(root, `${name}-signer-home`, 'work', '.svc', 'runs', 'r1', 'state.json');
      const { repo, origin, branch } = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      return { repo, origin, branch };
    };
    const receipt = await signPod('spec-repo', workspace('spec-repo'), { state, env });
    assert.deepEqual({ ...signed('spec-repo'), receipt: receipt?.repo },
      { repo: 'acme/app', origin: 'chatb', branch: 'svc/r1', receipt: 'acme/app' });
    // Refused (no evidence), the run has no branch the signer checked.
    assert.equal(await signPod('spec-refused', workspace('spec-refused'), { state, env, evidence: false }), null);
    assert.deepEqual(signed('spec-refused'), { repo: 'acme/app', origin: 'chatb', branch: null });
  });

  it("names the sealed origin's repository without a routed name, and the run's own group as its group", async () => {
    // The copy names another run's group: the Control Plane would list this run among that run's attempts.
    const state = { repo: 'victim/other', origin: 'cli', group_id: 'r0' };
    const originUrl = 'https://github.com/acme/sealed.git';
    const row = (name: string) => {
      const file = join(root, `${name}-signer-home`, 'work', '.svc', 'runs', 'r1', 'state.json');
      const { repo, origin, group_id } = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      return { repo, origin, group_id };
    };
    const receipt = await signPod('sealed-repo', workspace('sealed-repo'), { state, originUrl });
    assert.deepEqual(row('sealed-repo'), { repo: 'acme/sealed', origin: 'cli', group_id: 'r1' });
    assert.deepEqual([receipt?.repo, receipt?.group_id], ['acme/sealed', 'r1']);
    assert.ok(receipt?.attestation?.verified.includes('group_id'));
    // Routed, the row names the routed repository (its stats and filters, as a local run's); the receipt the origin its
    // pull request goes to, which a merge checks it against. An SVC_ORIGIN no launcher sets is not the run's origin.
    const env = { SVC_ORIGIN: 'chatb', SVC_REPO_NAME: 'acme/app' };
    const routed = await signPod('sealed-routed', workspace('sealed-routed'), { state, originUrl, env });
    assert.deepEqual([row('sealed-routed').repo, row('sealed-routed').origin, routed?.repo],
      ['acme/app', 'chatb', 'acme/sealed']);
    await signPod('bad-origin', workspace('bad-origin'), { state, env: { SVC_ORIGIN: 'chat\nb' } });
    assert.equal(row('bad-origin').origin, 'cli');
  });

  it('refuses a run folder whose state.json names another run, and signs nothing', async () => {
    await assert.rejects(signPod('other-run', workspace('other-run'), { state: { run: 'r2' } }),
      { name: 'RefusedError', message: 'The run folder names k8s/r2, not k8s/r1' });
  });

  // The signer's log is where the trigger reads its outcome: a value the agent wrote carries no line into it.
  it('quotes what a refused state.json names, so its text stays on one line', async () => {
    const source = 'k8s\n{"status":"succeeded"}';
    await assert.rejects(signPod('forged-source', workspace('forged-source'), { state: { source } }),
      { name: 'RefusedError', message: 'The run folder names "k8s\\n{\\"status\\":\\"succeeded\\"}"/r1, not k8s/r1' });
  });
});

describe('a hostile workspace ends the signer, never hangs it', () => {
  it('refuses a FIFO planted at .git/objects/info/alternates before any git opens it', async () => {
    const w = workspace('fifo');
    const fifo = join(w.ws, '.git', 'objects', 'info', 'alternates');
    rmSync(fifo, { force: true });
    execFileSync('mkfifo', [fifo]);
    assert.throws(() => verifyCommits(w.ws, join(root, 'fifo-scratch'), w.base, w.head, 'svc/r1'),
      (err: unknown) => err instanceof UnverifiableError && /alternates is a FIFO/.test(err.message));
    // The whole signer: a signed not_verified receipt that says why, with no head and no diff.
    const receipt = await signPod('fifo', w);
    assert.equal(receipt?.verdict, 'not_verified');
    assert.equal(receipt?.head_sha, null);
    assert.deepEqual(receipt?.diff.paths, []);
    assert.match(receipt?.gaps.join('\n') ?? '', /could not verify the run's commits: .*alternates is a FIFO/);
  });

  it('refuses a socket and a link to a device among the object files', async () => {
    const socketWs = workspace('socket');
    const socketPath = join(socketWs.ws, '.git', 'objects', 'pack', 'pack-0.pack');
    const server = createServer();
    await new Promise<void>((done) => server.listen(socketPath, done));
    try {
      assert.throws(() => verifyCommits(socketWs.ws, join(root, 'socket-scratch'), socketWs.base, socketWs.head,
        'svc/r1'), /pack-0\.pack is a socket/);
    } finally {
      server.close();
    }
    const linkWs = workspace('devlink');
    symlinkSync('/dev/zero', join(linkWs.ws, '.git', 'objects', 'pack', 'pack-1.idx'));
    assert.throws(() => verifyCommits(linkWs.ws, join(root, 'devlink-scratch'), linkWs.base, linkWs.head, 'svc/r1'),
      /pack-1\.idx is a symbolic link/);
  });

  it('refuses links to folders (one to itself, one to /) before walking behind them', () => {
    const loop = workspace('dirlink-loop');
    const objects = join(loop.ws, '.git', 'objects');
    symlinkSync('.', join(objects, 'a'));
    symlinkSync('.', join(objects, 'b'));
    assert.throws(() => verifyCommits(loop.ws, join(root, 'dirlink-loop-scratch'), loop.base, loop.head, 'svc/r1'),
      (err: unknown) => err instanceof UnverifiableError && /objects\/[ab] is a symbolic link/.test(err.message));
    const rooted = workspace('dirlink-root');
    symlinkSync('/', join(rooted.ws, '.git', 'objects', 'r'));
    assert.throws(() => verifyCommits(rooted.ws, join(root, 'dirlink-root-scratch'), rooted.base, rooted.head,
      'svc/r1'), (err: unknown) => err instanceof UnverifiableError && /objects\/r is a symbolic link/.test(err.message));
  });

  it('refuses alternates that borrow objects from outside the workspace', () => {
    const w = workspace('borrow-out');
    const elsewhere = workspace('borrow-elsewhere');
    writeFileSync(join(w.ws, '.git', 'objects', 'info', 'alternates'), `${join(elsewhere.ws, '.git', 'objects')}\n`);
    assert.throws(() => verifyCommits(w.ws, join(root, 'borrow-scratch'), w.base, w.head, 'svc/r1'),
      /borrow from outside it/);
  });

  it('skips an alternate git could not open, and refuses alternates nested past git\'s five', () => {
    const w = workspace('alt-nest');
    const alternates = (objects: string, text: string) => {
      mkdirSync(join(objects, 'info'), { recursive: true });
      writeFileSync(join(objects, 'info', 'alternates'), text);
    };
    alternates(join(w.ws, '.git', 'objects'), '# a comment\n\nno-such-folder\n');
    const v = verifyCommits(w.ws, join(root, 'alt-nest-scratch'), w.base, w.head, 'svc/r1');
    assert.equal(v.diff.files.length, 1);
    const chain = [0, 1, 2, 3, 4, 5].map((i) => join(w.ws, `alt${i}`));
    alternates(join(w.ws, '.git', 'objects'), `${chain[0]}\n`);
    for (let i = 0; i < 5; i++) alternates(chain[i]!, `${chain[i + 1]}\n`);
    mkdirSync(chain[5]!);
    assert.throws(() => verifyCommits(w.ws, join(root, 'alt-nest-scratch'), w.base, w.head, 'svc/r1'),
      /alternates nest too deep/);
  });

  it('kills a git that waits past its time limit (a FIFO the checks could not see)', () => {
    const fifo = join(root, 'stuck-fifo');
    execFileSync('mkfifo', [fifo]);
    // hash-object opens the FIFO and waits for a writer that never comes: only the limit ends it.
    assert.throws(() => svcGit(root, ['hash-object', fifo], {}, signerGit(200)), FailedError);
  });
});

describe('verifyCommits', () => {
  it('copies base..head into its own repository and diffs them there', () => {
    const { ws, base, head } = workspace('ok');
    const v = verifyCommits(ws, join(root, 'ok-scratch'), base, head, 'svc/r1');
    assert.deepEqual(v.diff.files, [{ path: 'f1.txt', insertions: 1, deletions: 0 }]);
    assert.equal(git(v.repo, ['rev-parse', 'refs/heads/svc/r1']), head);
    assert.deepEqual(policyAt(v.repo, base).checks.map((c) => c.name), ['test']);
  });

  it('gives an empty diff for a run that changed nothing (head is the base)', () => {
    const { ws, base } = workspace('empty');
    assert.deepEqual(verifyCommits(ws, join(root, 'empty-scratch'), base, base, 'svc/r1').diff.files, []);
  });

  it('never reads the workspace\'s git config: settings there run no program and leave the patch alone', () => {
    const { ws, base, head } = workspace('config');
    const marker = join(root, 'config-ran');
    writeFileSync(join(root, 'evil.sh'), `#!/bin/sh\ntouch ${marker}\n`);
    chmodSync(join(root, 'evil.sh'), 0o755);
    const evil = join(root, 'evil.sh');
    const planted = [
      ['core.fsmonitor', evil], ['gpg.program', evil], ['log.showSignature', 'true'], ['diff.noprefix', 'true'],
    ];
    for (const [k, v] of planted) git(ws, ['config', k!, v!]);
    // The planted config is live for git run in the workspace: there the patch loses its a/ b/ prefixes.
    assert.match(git(ws, ['diff', base, head]), /^--- f1\.txt$/m);
    const v = verifyCommits(ws, join(root, 'config-scratch'), base, head, 'svc/r1');
    assert.match(v.diff.patch, /^--- a\/f1\.txt$/m);
    assert.equal(existsSync(marker), false);
  });

  it('refuses a run whose file content was replaced under its name: the clean copy names it by its real hash', () => {
    const { ws, base, head } = workspace('tampered-blob');
    const changed = git(ws, ['rev-parse', 'HEAD:f1.txt']);
    writeFileSync(join(root, 'tampered-blob.txt'), 'something else\n');
    const other = git(ws, ['hash-object', '-w', join(root, 'tampered-blob.txt')]);
    chmodSync(objectPath(ws, changed), 0o644);
    copyFileSync(objectPath(ws, other), objectPath(ws, changed));
    assert.throws(() => verifyCommits(ws, join(root, 'tampered-blob-scratch'), base, head, 'svc/r1'),
      /^UnverifiableError: The run's commits did not pass the hash check/);
  });

  it('refuses a head commit whose object was replaced by other content', () => {
    const { ws, base, head } = workspace('tampered');
    const tree = git(ws, ['rev-parse', 'HEAD^{tree}']);
    const target = objectPath(ws, head);
    chmodSync(target, 0o644);
    copyFileSync(objectPath(ws, tree), target);
    assert.throws(() => verifyCommits(ws, join(root, 'tampered-scratch'), base, head, 'svc/r1'), UnverifiableError);
  });

  it('refuses a head that does not descend from the sealed base, and a missing head', () => {
    const { ws, base } = workspace('orphan');
    git(ws, ['checkout', '-q', '--orphan', 'other']);
    git(ws, ['commit', '-qm', 'unrelated']);
    const orphan = git(ws, ['rev-parse', 'HEAD']);
    const verify = (head: string) => () => verifyCommits(ws, join(root, 'orphan-scratch'), base, head, 'svc/r1');
    assert.throws(verify(orphan), /does not descend|hash check/);
    assert.throws(verify('f'.repeat(40)), /does not hold commit/);
    assert.throws(verify(''), /no head commit/);
  });

  it("refuses a base commit's policy.json that is not JSON (never read as the defaults)", () => {
    const repo = join(root, 'bad-policy');
    mkdirSync(join(repo, '.svc'), { recursive: true });
    git(repo, ['init', '-q']);
    writeFileSync(join(repo, '.svc', 'policy.json'), '{"checks": [');
    git(repo, ['add', '-A']);
    git(repo, ['commit', '-qm', 'bad policy']);
    const base = git(repo, ['rev-parse', 'HEAD']);
    assert.throws(() => policyAt(join(repo, '.git'), base),
      { name: 'PolicyError', message: 'policy.json at the base commit is not valid JSON' });
  });

  it('refuses git objects that lead out of the workspace through a link', () => {
    const { ws, base, head } = workspace('link');
    const elsewhere = join(root, 'link-elsewhere');
    renameSync(join(ws, '.git', 'objects'), elsewhere);
    symlinkSync(elsewhere, join(ws, '.git', 'objects'));
    assert.throws(() => verifyCommits(ws, join(root, 'link-scratch'), base, head, 'svc/r1'), /lead outside/);
  });
});

describe('copyRunFolder', () => {
  it('copies regular files only, follows no link and drops a receipt it finds', () => {
    const from = join(root, 'run-from');
    mkdirSync(join(from, 'artifacts', 'checks'), { recursive: true });
    writeFileSync(join(from, 'state.json'), '{}');
    writeFileSync(join(from, 'artifacts', 'evidence.json'), '{"e":1}');
    writeFileSync(join(from, 'artifacts', 'checks', 'test.log'), 'ok');
    writeFileSync(join(from, 'artifacts', 'receipt.json'), '{"forged":true}');
    writeFileSync(join(from, 'artifacts', 'diffstat.json'), '{"files":[]}');
    writeFileSync(join(from, 'ship.json'), '{"events_offset":1000000}');
    const secret = join(root, 'signer-key.pem');
    writeFileSync(secret, 'PRIVATE KEY');
    symlinkSync(secret, join(from, 'artifacts', 'leak.txt'));
    symlinkSync(secret, join(from, 'events.jsonl'));
    symlinkSync(root, join(from, 'artifacts', 'dir-link'));
    const to = join(root, 'run-to');
    copyRunFolder(from, to);
    const copied = readdirSync(to, { recursive: true, withFileTypes: true }).filter((e) => !e.isDirectory());
    assert.deepEqual(copied.map((e) => relative(to, join(e.parentPath, e.name))).sort(),
      ['artifacts/checks/test.log', 'artifacts/evidence.json', 'state.json']);
    assert.equal(readFileSync(join(to, 'artifacts', 'evidence.json'), 'utf8'), '{"e":1}');
    assert.equal(readFileSync(join(to, 'artifacts', 'checks', 'test.log'), 'utf8'), 'ok');
    const dropped = ['artifacts/receipt.json', 'artifacts/diffstat.json', 'ship.json', 'artifacts/leak.txt',
      'events.jsonl', 'artifacts/dir-link'];
    for (const gone of dropped) {
      assert.equal(existsSync(join(to, gone)), false, gone);
    }
  });

  // Its checks and errors are the agent's lines too (the run page's timeline draws them): marked as the run
  // container's, as ingest marks the ones it ships itself; a receipt line it wrote is left out.
  it('marks the agent\'s check and error lines in its copy of events.jsonl, and leaves out its receipt line', () => {
    const from = join(root, 'run-from-events');
    mkdirSync(from, { recursive: true });
    writeFileSync(join(from, 'state.json'), '{}');
    const ts = new Date().toISOString();
    const lines = [
      { seq: 1, kind: 'check', ts, data: { name: 'test', exit_code: 0, duration_ms: 3 } },
      { seq: 2, kind: 'error', ts, data: { message: 'the gate is down', by: 'svc' } },
      { seq: 3, kind: 'receipt', ts, data: { verdict: 'verified' } },
      { seq: 4, kind: 'log', ts, data: { stream: 'stdout', text: 'ok' } },
    ];
    writeFileSync(join(from, 'events.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n'));
    const to = join(root, 'run-to-events');
    copyRunFolder(from, to);
    const copied = readFileSync(join(to, 'events.jsonl'), 'utf8').split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(copied.map((e) => [e.kind, e.data]), [
      ['check', { name: 'test', exit_code: 0, duration_ms: 3, by: 'run-container' }],
      ['error', { message: 'the gate is down', by: 'run-container' }],
      ['log', { stream: 'stdout', text: 'ok' }],
    ]);
  });

  it('refuses a run folder that is a link', () => {
    symlinkSync(join(root, 'run-from'), join(root, 'run-link'));
    assert.throws(() => copyRunFolder(join(root, 'run-link'), join(root, 'run-to2')), /No run folder/);
  });
});

describe('seal, evidence and checks', () => {
  let ws: string;
  before(() => {
    ws = workspace('seal').ws;
  });

  it('seals HEAD and origin, and refuses a missing or malformed seal', () => {
    const dir = join(root, 'sealed');
    const seal = writeSeal(ws, dir, join(root, 'seal-handoff.json'));
    assert.equal(seal.base_sha, git(ws, ['rev-parse', 'HEAD']));
    assert.match(seal.origin_url ?? '', /^file:\/\/.*seal-origin$/);
    assert.deepEqual(readSeal(dir).base_sha, seal.base_sha);
    assert.throws(() => readSeal(join(root, 'no-seal')), FailedError);
    writeFileSync(join(dir, 'seal.json'), '{"base_sha":"HEAD"}');
    assert.throws(() => readSeal(dir), FailedError);
  });

  it('seals a workspace without origin with no URL and why, for the signer\'s error when a PR is asked for', () => {
    const bare = workspace('seal-no-origin').ws;
    git(bare, ['remote', 'remove', 'origin']);
    const seal = writeSeal(bare, join(root, 'sealed-no-origin'), join(root, 'seal-no-origin-handoff.json'));
    assert.equal(seal.origin_url, null);
    assert.match(seal.origin_problem ?? '', /git remote add origin/);
    assert.equal(readSeal(join(root, 'sealed-no-origin')).origin_problem, seal.origin_problem);
  });

  it('stores the sealed run once the Control Plane answers, trying again while it does not', async () => {
    const answers = [503, 502, 200];
    const seen: number[] = [];
    let body = '';
    const cp = createHttpServer((req, res) => {
      let sent = '';
      req.setEncoding('utf8').on('data', (c: string) => (sent += c)).on('end', () => {
        body = sent;
        const status = answers.shift() ?? 200;
        seen.push(status);
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(status === 200 ? '{}' : '{"error":{"code":"unavailable","message":"not now"}}');
      });
    });
    await new Promise<void>((r) => cp.listen(0, '127.0.0.1', r));
    try {
      const trace = '0123456789abcdef0123456789abcdef';
      const env = {
        SVC_CONTROL_URL: `http://127.0.0.1:${(cp.address() as AddressInfo).port}`, SVC_CONTROL_TOKEN: 't',
        SVC_SOURCE: 'k8s', HOME: root, SVC_ORIGIN: 'jobs', SVC_TRACEPARENT: `00-${trace}-${'1'.repeat(16)}-01`,
        SVC_RUN_LEASE_UNTIL: '2026-12-01T00:10:00.000Z',
      };
      const seal = { base_sha: 'a'.repeat(40), origin_url: null, origin_problem: 'none', base_branch: 'main',
        sealed_at: new Date().toISOString() };
      assert.equal((await storeRun(env, 'r1', seal, { handed: newRunKey() })).unstored, null);
      assert.deepEqual(seen, [503, 502, 200]);
      // What the trigger dispatched, from the pod spec: the run container's rows never change it.
      const { origin, trace_id, lease_until } = JSON.parse(body).runs[0];
      assert.deepEqual({ origin, trace_id, lease_until }, { origin: 'jobs', trace_id: trace,
        lease_until: env.SVC_RUN_LEASE_UNTIL });
    } finally {
      cp.close();
    }
  });

  it("reads the Control Plane's answer to the move through typed readers: a non-list names no run", async () => {
    const answers = ['{"last_seq":"r1","unbound":"r1","stop_asked":"xr1x","deleted":"r1"}',
      '{"last_seq":[{"run":"r1","seq":"7"}],"stop_asked":["r1"]}', '{"last_seq":[null,{"run":"r1","seq":7}]}'];
    const cp = createHttpServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(answers.shift() ?? '{}');
    });
    await new Promise<void>((r) => cp.listen(0, '127.0.0.1', r));
    try {
      const env = {
        SVC_CONTROL_URL: `http://127.0.0.1:${(cp.address() as AddressInfo).port}`, SVC_CONTROL_TOKEN: 't',
        SVC_SOURCE: 'k8s', HOME: root,
      };
      const seal = { base_sha: 'a'.repeat(40), origin_url: null, origin_problem: 'none', base_branch: 'main',
        sealed_at: new Date().toISOString() };
      const stored = async () => {
        const { stopAsked, lastSeq, control } = await storeRun(env, 'r1', seal, { sealed: newRunKey() });
        return { stopAsked, lastSeq, control };
      };
      assert.deepEqual(await stored(), { stopAsked: false, lastSeq: 0, control: [] });
      assert.deepEqual(await stored(), { stopAsked: true, lastSeq: 0, control: [] });
      assert.deepEqual(await stored(), { stopAsked: false, lastSeq: 7, control: [] });
    } finally {
      cp.close();
    }
  });

  it('reads evidence through typed readers only', () => {
    const output = 'a'.repeat(64);
    const check = { name: 't', argv: ['true'], required: true, exit_code: 0, duration_ms: 5, output_sha256: output };
    const good = {
      type: 'svc.run_evidence', version: 1, run: 'r1', outcome: 'finished', error: null, exit_code: 0, checks: [check],
    };
    assert.equal(readEvidence(JSON.stringify(good), 'r1').checks[0]!.name, 't');
    assert.throws(() => readEvidence(JSON.stringify(good), 'r2'), EvidenceError);
    const hostile = JSON.stringify({ ...good, checks: [{ name: { toString: 1 } }] });
    assert.throws(() => readEvidence(hostile, 'r1'), EvidenceError);
    assert.throws(() => readEvidence('not json', 'r1'), EvidenceError);
  });

  it('judges the base policy\'s checks: a missing or changed one has no exit code, an extra one is ignored', () => {
    const checksOfPolicy = [
      { name: 'test', run: ['npm', 'test'], required: true },
      { name: 'lint', run: ['npm', 'run', 'lint'], required: false },
    ];
    const policy = { ...DEFAULT_POLICY, checks: checksOfPolicy };
    const reported = [
      { name: 'test', argv: ['true'], required: true, exit_code: 0, duration_ms: 1, output_sha256: '' },
      { name: 'extra', argv: ['true'], required: true, exit_code: 0, duration_ms: 1, output_sha256: '' },
    ];
    const { checks, gaps } = reconcileChecks(policy, reported);
    assert.deepEqual(checks.map((c) => [c.name, c.argv.join(' '), c.required, c.exit_code]), [
      ['test', 'npm test', true, null], ['lint', 'npm run lint', false, null],
    ]);
    assert.deepEqual(gaps, [
      'check "test" of the base commit\'s policy was changed in the run container',
      'check "lint" of the base commit\'s policy was not run in the run container',
      'check "extra" is not in the base commit\'s policy: ignored',
    ]);
  });
});

// The pieces the pod signer trusts instead of the run container's word (src/pod/): hash-checked commits, a copy of
// the run folder that follows no link, the base commit's policy, and a typed reading of the evidence.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync,
  renameSync,
} from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { verifyCommits, policyAt, UnverifiableError } from '../../src/pod/verified-commits.ts';
import { copyRunFolder } from '../../src/pod/run-copy.ts';
import { readEvidence, EvidenceError } from '../../src/engine/evidence.ts';
import { reconcileChecks } from '../../src/pod/sign.ts';
import { writeSeal, readSeal, SealError } from '../../src/pod/seal.ts';
import { DEFAULT_POLICY } from '../../src/engine/policy.ts';

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

after(() => rmSync(root, { recursive: true, force: true }));

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
    const secret = join(root, 'signer-key.pem');
    writeFileSync(secret, 'PRIVATE KEY');
    symlinkSync(secret, join(from, 'artifacts', 'leak.txt'));
    symlinkSync(secret, join(from, 'events.jsonl'));
    symlinkSync(root, join(from, 'artifacts', 'dir-link'));
    const to = join(root, 'run-to');
    assert.equal(copyRunFolder(from, to), 3);
    assert.equal(readFileSync(join(to, 'artifacts', 'evidence.json'), 'utf8'), '{"e":1}');
    assert.equal(readFileSync(join(to, 'artifacts', 'checks', 'test.log'), 'utf8'), 'ok');
    for (const gone of ['artifacts/receipt.json', 'artifacts/leak.txt', 'events.jsonl', 'artifacts/dir-link']) {
      assert.equal(existsSync(join(to, gone)), false, gone);
    }
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
    const seal = writeSeal(ws, dir);
    assert.equal(seal.base_sha, git(ws, ['rev-parse', 'HEAD']));
    assert.match(seal.origin_url ?? '', /^file:\/\/.*seal-origin$/);
    assert.deepEqual(readSeal(dir).base_sha, seal.base_sha);
    assert.throws(() => readSeal(join(root, 'no-seal')), SealError);
    writeFileSync(join(dir, 'seal.json'), '{"base_sha":"HEAD"}');
    assert.throws(() => readSeal(dir), SealError);
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

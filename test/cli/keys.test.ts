// `svc keys rotate`: a new signing key, with receipts signed by the old one still verifying (svc receipt verify) and
// still accepted by the Control Plane (GET /v1/keys lists what its merge queue accepts), unless revoked.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueReceipt, RECEIPT_TYPE, type ReceiptBody } from '../../src/engine/receipt.ts';
import { loadOrCreateSigningKey } from '../../src/keys.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';
import { serve, stop, type Served } from '../helpers/serve-cli.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

const BODY: ReceiptBody = {
  type: RECEIPT_TYPE, version: 1, source: 'local', run: 'r1', group_id: 'g1', repo: 'acme/api',
  branch: null, base_sha: 'b'.repeat(40), head_sha: null, spec_sha256: '0'.repeat(64), provider: 'fake', checks: [],
  diff: { files: 0, insertions: 0, deletions: 0, patch_sha256: '0'.repeat(64), paths: [] },
  cost: { usd: null, tokens_in: null, tokens_out: null }, verdict: 'verified', gaps: [],
  started_at: '2026-11-28T00:00:00.000Z', ended_at: '2026-11-28T00:01:00.000Z', issued_at: '2026-11-28T00:01:00.000Z',
};

describe('svc keys', () => {
  let dir: string;
  let home: string;
  let control: Served;
  const env = () => ({ PATH: process.env.PATH ?? '', HOME: home });
  const svc = (...args: string[]): Promise<ChildResult> => runChild(process.execPath, [CLI, ...args], { cwd: dir, env: env() });

  /** A receipt signed with the key this machine signs with now, written to a file; its kid. */
  function signNow(name: string): { file: string; kid: string } {
    const receipt = issueReceipt({ ...BODY, run: name }, loadOrCreateSigningKey(join(home, '.svc')));
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(receipt));
    return { file, kid: receipt.kid };
  }

  async function keysOfControl(): Promise<Array<{ kid: string; name: string; origin: string }>> {
    const body = (await (await fetch(`${control.url}/v1/keys`)).json()) as { keys: Array<{ kid: string; name: string; origin: string }> };
    return body.keys.map(({ kid, name, origin }) => ({ kid, name, origin }));
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-keys-'));
    home = join(dir, 'home');
    mkdirSync(home);
    control = await serve(['control', 'serve', '--port', '0'], { ...env(), SVC_CONTROL_PORT: '0' });
  });
  after(async () => {
    await stop(control);
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists no key and makes none where there is none yet', async () => {
    const empty = join(dir, 'empty-home');
    mkdirSync(empty);
    const r = await runChild(process.execPath, [CLI, 'keys', 'list', '--json'], { cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: empty } });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { keys: [] });
    const env = { PATH: process.env.PATH ?? '', HOME: empty };
    const table = await runChild(process.execPath, [CLI, 'keys', 'list'], { cwd: dir, env });
    assert.equal(table.code, 0, table.stderr);
    assert.equal(table.stderr, 'No signing key here yet: the first receipt (or svc keys rotate) makes it\n');
    assert.match(table.stdout, /^KID +ORIGIN +NAME\n$/);
    assert.equal(existsSync(join(empty, '.svc', 'keys')), false);
    const first = await runChild(process.execPath, [CLI, 'keys', 'rotate'], { cwd: dir, env });
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^New receipt signing key [0-9a-f]{16} in .*\n/);
    assert.ok(first.stdout.endsWith('\nThere was no key before: nothing to retire\n'));
  });

  it('rotates: the old key is retired, its receipts still verify and the Control Plane still accepts it', async () => {
    const first = signNow('r1');
    assert.equal((await svc('receipt', 'verify', first.file)).code, 0);
    const r = await svc('keys', 'rotate', '--json');
    assert.equal(r.code, 0, r.stderr);
    const done = JSON.parse(r.stdout) as { old: string; kept: boolean; new: string };
    assert.deepEqual([done.old, done.kept], [first.kid, true]);
    assert.notEqual(done.new, first.kid);
    const retired = join(home, '.svc', 'keys', 'retired', `${first.kid}.pub.pem`);
    assert.match(readFileSync(retired, 'utf8'), /^-----BEGIN PUBLIC KEY-----/);
    assert.equal(statSync(join(home, '.svc', 'keys', 'receipt-ed25519.pem')).mode & 0o777, 0o600);
    // The old receipt still verifies, and what is signed from now on carries the new key.
    const old = await svc('receipt', 'verify', first.file);
    assert.equal(old.code, 0, old.stderr);
    const second = signNow('r2');
    assert.equal(second.kid, done.new);
    assert.equal((await svc('receipt', 'verify', second.file)).code, 0);
    // The running Control Plane, unrestarted, accepts both: its own new key first, then the retired one.
    assert.deepEqual(await keysOfControl(), [
      { kid: done.new, name: 'local', origin: 'local' }, { kid: first.kid, name: 'local', origin: 'retired' },
    ]);
    const listed = await svc('keys', 'list');
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`^${done.new} +local +local$`, 'm'));
    assert.match(listed.stdout, new RegExp(`^${first.kid} +retired +local$`, 'm'));
  });

  it('rotates with --revoke: receipts of the revoked key stop verifying, earlier retired keys stay', async () => {
    const before = signNow('r3');
    const retiredEarlier = (await keysOfControl()).filter((k) => k.origin === 'retired').map((k) => k.kid);
    const r = await svc('keys', 'rotate', '--revoke');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`Revoked ${before.kid}: receipts it signed no longer verify here`));
    assert.equal(existsSync(join(home, '.svc', 'keys', 'retired', `${before.kid}.pub.pem`)), false);
    const refused = await svc('receipt', 'verify', before.file);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /Unknown key/i);
    const keys = await keysOfControl();
    assert.equal(keys.some((k) => k.kid === before.kid), false);
    assert.deepEqual(keys.filter((k) => k.origin === 'retired').map((k) => k.kid), retiredEarlier);
    assert.equal((await svc('receipt', 'verify', join(dir, 'r1.json'))).code, 0, 'the first key, retired earlier, still verifies');
  });

  it('refuses an unknown subcommand or argument with exit 2 and changes no key', async () => {
    const before = readFileSync(join(home, '.svc', 'keys', 'receipt-ed25519.pem'), 'utf8');
    assert.equal((await svc('keys', 'spin')).code, 2);
    assert.equal((await svc('keys', 'rotate', 'now')).code, 2);
    assert.equal((await svc('keys', 'rotate', '--force')).code, 2);
    assert.equal(readFileSync(join(home, '.svc', 'keys', 'receipt-ed25519.pem'), 'utf8'), before);
  });
});

describe('the signing key files', () => {
  it('are made even where a crash left a temporary file under this process id', () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-keys-stale-'));
    try {
      const keys = join(home, 'keys');
      mkdirSync(keys, { recursive: true });
      for (const name of ['receipt-ed25519.pem', 'receipt-ed25519.pub.pem']) {
        writeFileSync(join(keys, `${name}.${process.pid}.tmp`), 'left by a crash');
      }
      const made = loadOrCreateSigningKey(home);
      assert.ok(existsSync(join(keys, 'receipt-ed25519.pem')));
      assert.equal(made.kid, loadOrCreateSigningKey(home).kid);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

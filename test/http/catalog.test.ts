import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, mkdirSync, statSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicKey } from 'node:crypto';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import { createControlClient } from '../../src/client/client.ts';

function script(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

describe('GET /v1/providers', () => {
  let control: TestControl;
  let bin: string;
  before(async () => {
    bin = mkdtempSync(join(tmpdir(), 'svc-bin-'));
    script(bin, 'claude', 'echo "2.0.14 (Claude Code)"');
    script(bin, 'codex', 'exit 3');
    writeFileSync(join(bin, 'gemini'), 'not executable', { mode: 0o644 });
    mkdirSync(join(bin, 'aider'));
    script(bin, 'my-agent', 'echo should-not-be-asked');
    control = await startTestControl({ env: { PATH: `${bin}:/usr/bin:/bin` } });
    const put = await control.request('PUT', '/v1/config', { body: { providers: { mine: { command: ['my-agent', '--yes'] }, gone: { command: ['/nonexistent/agent'] } } } });
    assert.equal(put.status, 200);
  });
  after(async () => {
    await control.close();
    rmSync(bin, { recursive: true, force: true });
  });

  it('lists the five built-in providers with availability, path and version from PATH', async () => {
    const res = await control.request('GET', '/v1/providers');
    assert.equal(res.status, 200);
    assert.ok(Array.isArray(res.json), 'a bare array, as DESIGN §4 says');
    const by = Object.fromEntries<any>(res.json.map((p: { name: string }) => [p.name, p]));
    const untested = { tested_version: '2.1.330', tested_range: '>=2.1.330 <3.0.0', within_tested_range: false };
    const claude = { name: 'claude', kind: 'builtin', available: true, path: join(bin, 'claude'), version: '2.0.14' };
    assert.deepEqual(by.claude, { ...claude, ...untested, default: false }, 'older than the tested range');
    assert.equal(by.codex.available, true);
    assert.equal(by.codex.version, null, 'a --version that fails with no output is unknown');
    assert.equal(by.gemini.available, false, 'a file without the execute bit is not a provider');
    assert.equal(by.aider.available, false, 'a directory is not a provider');
    const opencode = { name: 'opencode', kind: 'builtin', available: false, path: null, version: null };
    const unknown = { tested_version: '1.18.33', tested_range: '>=1.18.33 <2.0.0', within_tested_range: null };
    assert.deepEqual(by.opencode, { ...opencode, ...unknown, default: false });
  });

  it('adds configured command providers, resolved on PATH but never run for a version', async () => {
    const { json } = await control.request('GET', '/v1/providers');
    const by = Object.fromEntries(json.map((p: { name: string }) => [p.name, p]));
    const mine = { name: 'mine', kind: 'command', available: true, path: join(bin, 'my-agent'), version: null };
    const none = { tested_version: null, tested_range: null, within_tested_range: null };
    assert.deepEqual(by.mine, { ...mine, ...none, default: false });
    assert.equal(by.gone.available, false);
  });

  it('reaches the client as the same bare array', async () => {
    const providers = await createControlClient({ url: control.url }).providers();
    assert.ok(Array.isArray(providers));
    assert.ok(providers.some((p) => p.name === 'claude' && p.kind === 'builtin' && p.available));
  });

  it('marks the provider the default_provider setting names', async () => {
    assert.equal((await control.request('PUT', '/v1/config', { body: { default_provider: 'mine' } })).status, 200);
    const { json } = await control.request('GET', '/v1/providers');
    assert.deepEqual(json.filter((p: { default: boolean }) => p.default).map((p: { name: string }) => p.name), ['mine']);
    await control.request('PUT', '/v1/config', { body: { default_provider: null } });
  });
});

describe('the providers of operator.json, which every run the Control Plane starts has', () => {
  let control: TestControl;
  let root: string;
  let operatorFile: string;
  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-operator-providers-'));
    const bin = join(root, 'bin');
    mkdirSync(bin);
    mkdirSync(join(root, 'home', '.svc'), { recursive: true });
    script(bin, 'ops-agent', 'echo should-not-be-asked');
    script(bin, 'my-agent', 'echo should-not-be-asked');
    script(bin, 'claude', 'echo "2.1.330 (Claude Code)"');
    operatorFile = join(root, 'home', '.svc', 'operator.json');
    writeFileSync(operatorFile, JSON.stringify({ providers: {
      ops: { command: ['ops-agent', '--yes'] },
      claude: { command: ['/usr/bin/env', 'my-wrapper'] },
      shared: { command: ['/nonexistent/agent'] },
    } }));
    control = await startTestControl({ env: { PATH: `${bin}:/usr/bin:/bin`, HOME: join(root, 'home') } });
    const put = await control.request('PUT', '/v1/config', { body: { providers: { shared: { command: ['my-agent'] } } } });
    assert.equal(put.status, 200);
  });
  after(async () => {
    await control.close();
    rmSync(root, { recursive: true, force: true });
  });

  const listed = async () => {
    const res = await control.request('GET', '/v1/providers');
    assert.equal(res.status, 200);
    return res.json as { name: string; kind: string; available: boolean; path: string | null; default: boolean }[];
  };

  it('lists them beside the setting\'s, the setting\'s entry winning per name as it does in the run', async () => {
    const items = await listed();
    const by = Object.fromEntries(items.map((p) => [p.name, p]));
    assert.deepEqual([by.ops?.kind, by.ops?.available, by.ops?.path], ['command', true, join(root, 'bin', 'ops-agent')]);
    assert.deepEqual([by.shared?.kind, by.shared?.path], ['command', join(root, 'bin', 'my-agent')]);
    assert.equal(items.filter((p) => p.name === 'shared').length, 1);
  });

  it('lists a built-in the operator redefines once, as the command a run of that name runs', async () => {
    const claude = (await listed()).filter((p) => p.name === 'claude');
    assert.deepEqual(claude.map((p) => [p.kind, p.path]), [['command', '/usr/bin/env']]);
  });

  it('accepts one as default_provider and marks it; a name no run has is still 400 naming the setting', async () => {
    const put = await control.request('PUT', '/v1/config', { body: { default_provider: 'ops' } });
    assert.equal(put.status, 200, JSON.stringify(put.json));
    assert.deepEqual((await listed()).filter((p) => p.default).map((p) => p.name), ['ops']);
    const ghost = await control.request('PUT', '/v1/config', { body: { default_provider: 'ghost' } });
    assert.equal(ghost.status, 400);
    assert.equal(ghost.json.error.code, 'invalid_param');
    assert.equal(ghost.headers.get('svc-error-field'), 'default_provider');
    assert.equal((await control.request('PUT', '/v1/config', { body: { default_provider: null } })).status, 200);
  });

  it('answers 503 not_configured while operator.json is broken, as every run it starts would fail on it', async () => {
    const good = readFileSync(operatorFile);
    writeFileSync(operatorFile, JSON.stringify({ providers: { near: { command: ['./near-agent'] } } }));
    try {
      const res = await control.request('GET', '/v1/providers');
      assert.equal(res.status, 503);
      assert.equal(res.json.error.code, 'not_configured');
      const unrelated = await control.request('PUT', '/v1/config', { body: { max_concurrent_runs: 3 } });
      assert.equal(unrelated.status, 200, 'a setting that names no provider is still written');
    } finally {
      writeFileSync(operatorFile, good);
    }
  });
});

describe('GET /v1/integrations', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl({
      env: {
        PATH: '/nonexistent',
        CHATA_SIGNING_SECRET: 'chata-secret-value',
        CHATA_TEAM_IDS: 'T1DC2JH3J',
        TRACKERA_WEBHOOK_SECRET: 'shared-secret-value',
        CHATB_SECURITY_TOKEN: 'shared-secret-value',
        TRACKERB_WEBHOOK_SECRET: 'trackerb-secret',
        TRACKERB_BASE_URL: 'http://insecure.example',
        TRACKERB_EMAIL: 'me@example.com',
        TRACKERB_API_TOKEN: 'trackerb-api-token',
        ERRTRACK_AUTH_TOKEN: 'errtrack-token-value',
      },
    });
  });
  after(() => control.close());

  it('says which routes and outbound integrations are configured, as booleans only', async () => {
    const res = await control.request('GET', '/v1/integrations');
    assert.equal(res.status, 200);
    const by = Object.fromEntries(res.json.items.map((i: { name: string; configured: boolean }) => [i.name, i.configured]));
    assert.deepEqual(by, {
      errtrack: false,
      chata: true,
      trackera: false,
      trackerb: false,
      chatb: false,
      jobs: false,
      webhook: false,
      trackera_comments: false,
      trackerb_comments: false,
      github_prs: false,
      errtrack_fetch: true,
    });
  });

  it('never echoes a secret value', async () => {
    const res = await control.request('GET', '/v1/integrations');
    for (const secret of ['chata-secret-value', 'shared-secret-value', 'trackerb-api-token', 'errtrack-token-value', 'insecure.example', 'me@example.com']) {
      assert.equal(res.text.includes(secret), false, secret);
    }
    const chata = res.json.items.find((i: { name: string }) => i.name === 'chata');
    assert.deepEqual(chata.variables, ['CHATA_SIGNING_SECRET', 'CHATA_TEAM_IDS']);
  });

  it('names the real service each webhook route fits and the signature headers it reads', async () => {
    const res = await control.request('GET', '/v1/integrations');
    const fits = Object.fromEntries(res.json.items.filter((i: { kind: string }) => i.kind === 'trigger')
      .map((i: { route: string; service?: string; headers?: string[] }) => [i.route, [i.service ?? null, i.headers ?? []]]));
    assert.deepEqual(fits, {
      '/errtrack': ['Sentry', ['errtrack-hook-signature', 'sentry-hook-signature']],
      '/chata': ['Slack', ['x-chata-signature', 'x-chata-request-timestamp', 'x-slack-signature', 'x-slack-request-timestamp']],
      '/trackera': ['Linear', ['trackera-signature', 'linear-signature']],
      '/trackerb': ['Jira Cloud', ['x-hub-signature']],
      '/chatb': ['Microsoft Teams (outgoing webhook)', ['authorization']],
      '/jobs': [null, []],
      '/webhook': ['GitHub', ['x-hub-signature-256']],
    });
  });

  it('has no github_token setting to store a GitHub token in', async () => {
    const res = await control.request('PUT', '/v1/config', { body: { github_token: 'ghp_x' } });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
  });
});

describe('GET /v1/notifications', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
    const base = Date.UTC(2026, 0, 1);
    const list = [];
    for (let i = 0; i < 5; i++) {
      list.push({
        job_id: `j${i}`, source: 'local', run: `r${i}`, origin: 'chata', channel: 'chata_reply',
        target: `https://hooks.chata.example/services/T0/B0/tok${i}?x=1`, status: 'pending' as const, attempts: 0,
        error: null, created_at: base + i, updated_at: base + i,
      });
    }
    control.deps.stores.notifications.ingest('local', list);
  });
  after(() => control.close());

  it('lists newest first with host-only targets and ISO times', async () => {
    const res = await control.request('GET', '/v1/notifications');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json.items.map((n: { job_id: string }) => n.job_id), ['j4', 'j3', 'j2', 'j1', 'j0']);
    const first = res.json.items[0];
    assert.equal(first.target, 'hooks.chata.example');
    assert.equal(first.created_at, '2026-01-01T00:00:00.004Z');
    assert.deepEqual(Object.keys(first).sort(), ['attempts', 'channel', 'created_at', 'error', 'id', 'job_id', 'origin', 'reported_by', 'run', 'source', 'status', 'target', 'updated_at']);
    assert.equal(res.text.includes('tok4'), false);
    assert.equal(res.json.next_cursor, null);
  });

  it('pages with an opaque cursor and rejects a forged one', async () => {
    const page1 = await control.request('GET', '/v1/notifications?limit=2');
    assert.equal(page1.json.items.length, 2);
    const page2 = await control.request('GET', `/v1/notifications?limit=2&cursor=${page1.json.next_cursor}`);
    assert.deepEqual(page2.json.items.map((n: { job_id: string }) => n.job_id), ['j2', 'j1']);
    const bad = await control.request('GET', '/v1/notifications?cursor=bm90LWEtY3Vyc29y');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'invalid_param');
  });

  it('updates a notification in place as its delivery progresses', async () => {
    const at = Date.UTC(2026, 0, 2);
    control.deps.stores.notifications.ingest('local', [{
      job_id: 'j1', source: 'local', run: 'r1', origin: 'chata', channel: 'chata_reply', target: 'hooks.chata.example',
      status: 'failed', attempts: 3, error: 'POST failed: 500',
      created_at: Date.UTC(2026, 0, 1) + 1, updated_at: at,
    }]);
    const { json } = await control.request('GET', '/v1/notifications');
    assert.equal(json.items.length, 5);
    const j1 = json.items.find((n: { job_id: string }) => n.job_id === 'j1');
    assert.equal(j1.status, 'failed');
    assert.equal(j1.attempts, 3);
    assert.equal(j1.error, 'POST failed: 500');
  });
});

describe('GET /v1/keys and /v1/repos', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());

  it('creates the receipt key on first use and serves only its public half', async () => {
    const keyFile = join(control.deps.settings.svcHome, 'keys', 'receipt-ed25519.pem');
    assert.equal(existsSync(keyFile), false);
    const res = await control.request('GET', '/v1/keys');
    assert.equal(res.status, 200);
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    const [key] = res.json.keys;
    assert.match(key.kid, /^[0-9a-f]{16}$/);
    assert.equal(key.alg, 'EdDSA');
    assert.equal(createPublicKey(key.pem).asymmetricKeyType, 'ed25519');
    assert.equal(key.jwk.crv, 'Ed25519');
    assert.equal(Object.hasOwn(key.jwk, 'd'), false);
    assert.doesNotMatch(res.text, /PRIVATE/);
    const again = await control.request('GET', '/v1/keys');
    assert.equal(again.json.keys[0].kid, key.kid, 'the same key is served on later calls');
  });

  it('lists repository names from runs and configured repos, never their paths', async () => {
    control.deps.stores.runs.upsert('local', makeRun(1, { repo: 'acme/api', repo_path: '/home/me/src/api' }));
    control.deps.stores.runs.upsert('local', makeRun(2, { repo: 'acme/api' }));
    control.deps.stores.runs.upsert('local', makeRun(3, { repo: '/srv/checkouts/legacy' }));
    await control.request('PUT', '/v1/config', { body: { repos: ['/home/me/src/web', '/opt/tools/'] } });
    const res = await control.request('GET', '/v1/repos');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json.items.map((i: { name: string }) => i.name), ['acme/api', 'legacy', 'tools', 'web']);
    assert.deepEqual(res.json.items[0], { name: 'acme/api', served_by: [] });
    assert.equal(res.text.includes('/home/me'), false);
    assert.equal(res.text.includes('/srv'), false);
  });
});

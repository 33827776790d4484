import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { audited } from '../../src/control/audited.ts';
import type { Ctx } from '../../src/http/pipeline.ts';
import type { ControlDeps } from '../../src/control/deps.ts';
import { HttpError } from '../../src/http/http-error.ts';
import { createAuditStore, PRUNE_ACTION } from '../../src/db/audit-store.ts';
import { pruneAuditLog } from '../../src/control/main.ts';

describe('GET /v1/audit', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());

  it('records a successful mutation with actor, peer, action, target and outcome', async () => {
    await control.request('PUT', '/v1/config', { body: { retention_days: 7 } });
    const res = await control.request('GET', '/v1/audit?limit=1');
    assert.equal(res.status, 200);
    const [entry] = res.json.items;
    assert.equal(entry.actor, 'local');
    assert.match(entry.peer, /127\.0\.0\.1/);
    assert.equal(entry.action, 'config.write');
    assert.equal(entry.target, 'config');
    assert.equal(entry.outcome, 'ok');
    assert.deepEqual(entry.detail.keys, ['retention_days']);
    assert.equal(entry.detail.status, 200);
    assert.match(entry.at, /^\d{4}-\d\d-\d\dT/);
    assert.match(entry.hash, /^[0-9a-f]{64}$/);
  });

  it('records a call the handler refused with its error code', async () => {
    await control.request('PUT', '/v1/config', { body: { nope: 1 } });
    const [entry] = (await control.request('GET', '/v1/audit?limit=1')).json.items;
    assert.equal(entry.action, 'config.write');
    assert.equal(entry.outcome, 'invalid_param');
    assert.equal(entry.detail.status, 400);
  });

  it('records the run a path names as the target', async () => {
    await control.request('POST', '/v1/runs/local/r-missing/stop', { body: {} });
    const [entry] = (await control.request('GET', '/v1/audit?limit=1')).json.items;
    assert.equal(entry.action, 'run.stop');
    assert.equal(entry.target, 'local/r-missing');
    assert.notEqual(entry.outcome, 'ok');
  });

  it('records mutating calls the pipeline refused before the handler, with the guard\'s code', async () => {
    await control.request('PUT', '/v1/config', { body: 'x=1', headers: { 'content-type': 'text/plain' } });
    const [typed] = (await control.request('GET', '/v1/audit?limit=1')).json.items;
    assert.deepEqual([typed.action, typed.target, typed.outcome, typed.actor], ['config.write', 'config', 'unsupported_media_type', 'local']);
    assert.equal(typed.detail.status, 415);
    assert.equal(typed.detail.refused_by, 'pipeline');
    assert.match(typed.peer, /127\.0\.0\.1/);
    await control.request('PUT', '/v1/config', { body: '{', headers: { 'content-type': 'application/json' } });
    assert.equal((await control.request('GET', '/v1/audit?limit=1')).json.items[0].outcome, 'invalid_json');
    await control.request('POST', '/v1/runs/local/r-refused/stop', { body: {}, headers: { origin: 'http://evil.example' } });
    const [origin] = (await control.request('GET', '/v1/audit?limit=1')).json.items;
    assert.deepEqual([origin.action, origin.target, origin.outcome], ['run.stop', 'local/r-refused', 'forbidden_origin']);
    await control.request('POST', '/v1/ingest', { body: `{"source":"x","pad":"${'a'.repeat(17 * 1024 * 1024)}"}` });
    assert.equal((await control.request('GET', '/v1/audit?limit=1')).json.items[0].outcome, 'payload_too_large');
  });

  it('records no reads, no unknown routes and no wrong Host: they name no action', async () => {
    const before = (await control.request('GET', '/v1/audit?limit=1')).json.items[0].id;
    await control.request('GET', '/v1/config', { headers: { origin: 'http://evil.example' } });
    await control.request('POST', '/v1/nothing-here', { body: {} });
    await control.request('PATCH', '/v1/config', { body: {} });
    const rebound = await rawRequest(control.url, '/v1/config', { method: 'PUT', body: '{}', headers: { host: 'evil.example', 'content-type': 'application/json' } });
    assert.equal(rebound.status, 403);
    const after = (await control.request('GET', '/v1/audit?limit=1')).json.items[0].id;
    assert.equal(after, before);
  });

  it('pages newest first with next_cursor and rejects a cursor it did not issue', async () => {
    for (let i = 0; i < 4; i++) await control.request('PUT', '/v1/config', { body: { retention_days: i } });
    const all = (await control.request('GET', '/v1/audit?limit=500')).json.items.map((e: { id: number }) => e.id);
    const p1 = await control.request('GET', '/v1/audit?limit=2');
    const p2 = await control.request('GET', `/v1/audit?limit=2&cursor=${p1.json.next_cursor}`);
    assert.deepEqual([...p1.json.items, ...p2.json.items].map((e: { id: number }) => e.id), all.slice(0, 4));
    for (const cursor of ['abc', '%00', 'YTp4', 'bjoxOjI', 'YToxOjI']) {
      const bad = await control.request('GET', `/v1/audit?cursor=${cursor}`);
      assert.equal(bad.status, 400, cursor);
      assert.equal(bad.json.error.code, 'invalid_param');
    }
  });

  it('reports the chain intact with ?verify=true, and the first broken id after tampering', async () => {
    const ok = await control.request('GET', '/v1/audit?verify=true&limit=1');
    assert.deepEqual(ok.json.chain, { intact: true, first_broken_id: null });
    control.deps.db.prepare("UPDATE audit SET actor = 'mallory' WHERE id = 2").run();
    const broken = await control.request('GET', '/v1/audit?verify=1&limit=1');
    assert.deepEqual(broken.json.chain, { intact: false, first_broken_id: 2 });
    assert.equal((await control.request('GET', '/v1/audit?verify=maybe')).status, 400);
  });
});

describe('audit actor with a token', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl({ token: 'tok-for-audit-test' });
  });
  after(() => control.close());

  it('records the actor as "token" and never the token itself', async () => {
    await control.request('PUT', '/v1/config', { body: { retention_days: 1 } });
    const res = await control.request('GET', '/v1/audit');
    assert.equal(res.json.items[0].actor, 'token');
    assert.equal(res.text.includes('tok-for-audit-test'), false);
    const rows = JSON.stringify(control.deps.db.prepare('SELECT * FROM audit').all());
    assert.equal(rows.includes('tok-for-audit-test'), false);
  });

  it('records a mutating call with a wrong token as unauthenticated, never the token sent', async () => {
    const res = await control.request('PUT', '/v1/config', { body: { retention_days: 2 }, token: 'wrong-token-sent' });
    assert.equal(res.status, 401);
    const [entry] = control.deps.stores.audit.list({ limit: 1 }).items;
    assert.deepEqual([entry!.action, entry!.actor, entry!.outcome], ['config.write', 'unauthenticated', 'unauthorized']);
    assert.equal(JSON.stringify(control.deps.db.prepare('SELECT * FROM audit').all()).includes('wrong-token-sent'), false);
    const version = (await control.request('GET', '/v1/config')).json.version;
    assert.equal(version, 1, 'the refused write changed nothing');
  });
});

describe('audited wrapper', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());

  function ctx(peer: string, extra: Partial<Ctx<ControlDeps>> = {}): Ctx<ControlDeps> {
    return { params: {}, body: undefined, peer, req: { headers: {} }, requestId: 'req-1', deps: control.deps, ...extra } as unknown as Ctx<ControlDeps>;
  }

  it('records a crash as internal_error and rethrows the original error', async () => {
    const boom = new Error('disk on fire');
    const handler = audited('test.crash', () => {
      throw boom;
    });
    await assert.rejects(Promise.resolve().then(() => handler(ctx('10.0.0.9'))), (err) => err === boom);
    const [entry] = control.deps.stores.audit.list({ limit: 1 }).items;
    assert.equal(entry!.action, 'test.crash');
    assert.equal(entry!.outcome, 'internal_error');
    assert.equal(entry!.actor, 'anonymous', 'a non-loopback peer without a server token is anonymous');
    assert.equal(JSON.stringify(entry).includes('disk on fire'), false);
  });

  it('takes the target from the body, then from the reply of a started run', async () => {
    const fromBody = audited('merge.enqueue', () => ({ status: 202, body: {} }));
    await fromBody(ctx('127.0.0.1', { body: { source: 'edge', run: 'r9' } }));
    assert.equal(control.deps.stores.audit.list({ limit: 1 }).items[0]!.target, 'edge/r9');
    const fromReply = audited('run.start', () => ({ status: 202, body: { source: 'local', run: 'rNEW' } }));
    await fromReply(ctx('127.0.0.1', { body: { brief: 'x' } }));
    assert.equal(control.deps.stores.audit.list({ limit: 1 }).items[0]!.target, 'local/rNEW');
  });

  it('records an error reply returned (not thrown) by its code', async () => {
    const handler = audited('test.refuse', () => {
      throw new HttpError('invalid_transition', 'Run is running');
    });
    await assert.rejects(Promise.resolve().then(() => handler(ctx('127.0.0.1'))));
    assert.equal(control.deps.stores.audit.list({ limit: 1 }).items[0]!.outcome, 'invalid_transition');
    const replying = audited('test.reply', () => ({ status: 409, body: { error: { code: 'conflict', message: 'x' } } }));
    await replying(ctx('127.0.0.1'));
    assert.equal(control.deps.stores.audit.list({ limit: 1 }).items[0]!.outcome, 'conflict');
  });
});

describe('audit retention (SVC_CONTROL_AUDIT_RETENTION_DAYS)', () => {
  let control: TestControl;
  const DAY = 24 * 60 * 60 * 1000;
  before(async () => {
    control = await startTestControl({ settings: { auditRetentionDays: 30 } });
  });
  after(() => control.close());

  it('prunes rows older than the retention and the chain still verifies from the prune anchor', async () => {
    const now = Date.now();
    const old = createAuditStore(control.deps.db, () => now - 40 * DAY);
    for (let i = 0; i < 10; i++) old.append({ actor: 'local', peer: '127.0.0.1', action: 'config.write', target: 'config', outcome: 'ok' });
    for (let i = 0; i < 3; i++) control.deps.stores.audit.append({ actor: 'local', peer: '127.0.0.1', action: 'run.stop', target: 'local/r', outcome: 'ok' });
    assert.equal(pruneAuditLog(control.deps, now), 10);
    const items = control.deps.stores.audit.list({ limit: 500 }).items;
    assert.equal(items.length, 4, 'the 3 recent rows and the prune row');
    const [prune] = items;
    assert.deepEqual([prune!.action, prune!.actor], [PRUNE_ACTION, 'system']);
    assert.equal(prune!.detail!.deleted, 10);
    assert.equal(prune!.detail!.pruned_through_id, 10);
    const res = await control.request('GET', '/v1/audit?verify=true&limit=1');
    assert.deepEqual(res.json.chain, { intact: true, first_broken_id: null });
    assert.equal(pruneAuditLog(control.deps, now), 0, 'nothing more is old enough');
  });

  it('shows rows cut off the old end outside a prune as a broken chain', async () => {
    const oldest = control.deps.stores.audit.list({ limit: 500 }).items.at(-1)!.id;
    control.deps.db.prepare('DELETE FROM audit WHERE id = ?').run(oldest);
    const res = await control.request('GET', '/v1/audit?verify=true&limit=1');
    assert.deepEqual(res.json.chain, { intact: false, first_broken_id: oldest + 1 });
  });
});

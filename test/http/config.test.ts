import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

describe('GET/PUT /v1/config', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());

  it('serves every setting at its default with version 0 and an ETag', async () => {
    const res = await control.request('GET', '/v1/config');
    assert.equal(res.status, 200);
    assert.equal(res.json.version, 0);
    assert.equal(res.headers.get('etag'), '"0"');
    assert.deepEqual(res.json.config, {
      default_provider: null,
      providers: {},
      repos: [],
      max_concurrent_runs: 2,
      retention_days: 0,
    });
  });

  it('applies a partial update, raises the version and keeps other settings', async () => {
    const res = await control.request('PUT', '/v1/config', { body: { max_concurrent_runs: 4, default_provider: 'codex' } });
    assert.equal(res.status, 200);
    assert.equal(res.json.version, 1);
    assert.equal(res.json.config.max_concurrent_runs, 4);
    const got = await control.request('GET', '/v1/config');
    assert.equal(got.json.version, 1);
    assert.equal(got.json.config.default_provider, 'codex');
    assert.equal(got.json.config.retention_days, 0);
  });

  it('accepts back the {"config":…} shape GET returns', async () => {
    const got = await control.request('GET', '/v1/config');
    const res = await control.request('PUT', '/v1/config', { body: { ...got.json, config: { ...got.json.config, retention_days: 30 } } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.config.retention_days, 30);
  });

  it('rejects an unknown key with 400 invalid_param naming it in Svc-Error-Field, and writes nothing', async () => {
    const before = (await control.request('GET', '/v1/config')).json.version;
    const res = await control.request('PUT', '/v1/config', { body: { max_concurrent_runs: 8, colour: 'blue' } });
    assert.equal(res.status, 400);
    assert.deepEqual(Object.keys(res.json), ['error']);
    assert.deepEqual(res.json.error, { code: 'invalid_param', message: res.json.error.message });
    assert.equal(res.headers.get('svc-error-field'), 'colour');
    assert.match(res.json.error.message, /"colour"/);
    const after = await control.request('GET', '/v1/config');
    assert.equal(after.json.version, before);
    assert.notEqual(after.json.config.max_concurrent_runs, 8);
  });

  it('rejects a wrong type naming the key and the expected type', async () => {
    const res = await control.request('PUT', '/v1/config', { body: { retention_days: 'yes' } });
    assert.equal(res.status, 400);
    assert.equal(res.headers.get('svc-error-field'), 'retention_days');
    assert.match(res.json.error.message, /"retention_days" must be an integer/);
    const nested = await control.request('PUT', '/v1/config', { body: { providers: { mine: { command: [] } } } });
    assert.equal(nested.headers.get('svc-error-field'), 'providers', 'a nested key names the setting the form shows');
    const unknown = await control.request('PUT', '/v1/config', { body: { default_provider: 'nobody' } });
    assert.equal(unknown.headers.get('svc-error-field'), 'default_provider');
    for (const removed of ['pr.draft', 'notifications.enabled']) {
      const gone = await control.request('PUT', '/v1/config', { body: { [removed]: true } });
      assert.equal(gone.status, 400, `${removed} is no longer a setting`);
      assert.match(gone.json.error.message, /Unknown setting/);
    }
  });

  it('answers 409 conflict to a lost update and accepts the current version', async () => {
    const { json } = await control.request('GET', '/v1/config');
    const stale = await control.request('PUT', '/v1/config', { body: { retention_days: 1 }, headers: { 'if-match': String(json.version - 1) } });
    assert.equal(stale.status, 409);
    assert.equal(stale.json.error.code, 'conflict');
    const fresh = await control.request('PUT', '/v1/config', { body: { retention_days: 2 }, headers: { 'if-match': `"${json.version}"` } });
    assert.equal(fresh.status, 200);
    assert.equal(fresh.json.version, json.version + 1);
    const inBody = await control.request('PUT', '/v1/config', { body: { config: { retention_days: 3 }, version: json.version } });
    assert.equal(inBody.status, 409);
    const both = { body: { config: { retention_days: 3 }, version: json.version + 1 }, headers: { 'if-match': String(json.version) } };
    const disagree = await control.request('PUT', '/v1/config', both);
    assert.equal(disagree.status, 400);
    assert.equal(disagree.json.error.message, 'If-Match and "version" disagree');
  });

  it('answers 400 to a malformed If-Match', async () => {
    const res = await control.request('PUT', '/v1/config', { body: { retention_days: 1 }, headers: { 'if-match': 'banana' } });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
  });

  it('refuses a github_token, and never shows one an older release stored', async () => {
    const put = await control.request('PUT', '/v1/config', { body: { github_token: 'ghp_topsecret' } });
    assert.equal(put.status, 400);
    assert.equal(put.json.error.code, 'invalid_param');
    control.deps.stores.config.update((stored) => ({ ...stored, github_token: 'ghp_oldsecret' }));
    const got = await control.request('GET', '/v1/config');
    assert.equal(got.status, 200);
    assert.equal('github_token' in got.json.config, false);
    assert.equal(got.text.includes('ghp_oldsecret'), false);
    await control.request('PUT', '/v1/config', { body: got.json });
    assert.equal('github_token' in control.deps.stores.config.read().values, false, 'the next write drops the stale secret');
    const audit = await control.request('GET', '/v1/audit?limit=500');
    assert.equal(audit.text.includes('ghp_topsecret') || audit.text.includes('ghp_oldsecret'), false, 'the audit log names keys, never values');
  });

  it('answers 400 bad_request to a body that is not an object', async () => {
    for (const body of ['[]', '"x"', '3']) {
      const res = await control.request('PUT', '/v1/config', { body });
      assert.equal(res.status, 400, body);
      assert.equal(res.json.error.code, 'bad_request', body);
    }
  });
});

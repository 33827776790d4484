import { describe, it, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { createConfigStore, ConfigVersionConflict, type ConfigStore } from '../../src/db/control-stores.ts';
import { SETTINGS, REDACTED, mergeConfig, redactConfig, withDefaults, type Setting } from '../../src/control/config-schema.ts';
import { HttpError } from '../../src/http/http-error.ts';

function rejection(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HttpError) return err;
    throw err;
  }
  assert.fail('expected an HttpError');
}

describe('config schema', () => {
  it('rejects an unknown key and names it', () => {
    const err = rejection(() => mergeConfig(withDefaults({}), { colour: 'blue' }));
    assert.equal(err.code, 'invalid_param');
    assert.match(err.message, /"colour"/);
  });

  it('rejects a wrong type naming the key and the expected type', () => {
    const err = rejection(() => mergeConfig(withDefaults({}), { max_concurrent_runs: '4' }));
    assert.equal(err.code, 'invalid_param');
    assert.match(err.message, /"max_concurrent_runs" must be an integer/);
    assert.match(rejection(() => mergeConfig(withDefaults({}), { max_concurrent_runs: 0 })).message, /at least 1/);
    assert.match(rejection(() => mergeConfig(withDefaults({}), { repos: ['relative/path'] })).message, /"repos"/);
  });

  it('applies nothing when any key is bad', () => {
    const current = withDefaults({});
    assert.throws(() => mergeConfig(current, { max_concurrent_runs: 5, nope: 1 }));
    assert.equal(current.max_concurrent_runs, 2);
  });

  it('validates command providers and refuses to shadow built-in names', () => {
    const ok = mergeConfig(withDefaults({}), { providers: { mine: { command: ['/usr/bin/env', 'my-agent'] } }, default_provider: 'mine' });
    assert.deepEqual(ok.providers, { mine: { command: ['/usr/bin/env', 'my-agent'] } });
    assert.match(rejection(() => mergeConfig(withDefaults({}), { providers: { claude: { command: ['x'] } } })).message, /built-in/);
    assert.match(rejection(() => mergeConfig(withDefaults({}), { providers: { mine: { command: [] } } })).message, /providers\.mine\.command/);
    assert.match(rejection(() => mergeConfig(withDefaults({}), { providers: { mine: { command: ['x'], env: {} } } })).message, /providers\.mine\.env/);
    // Its runs would look for it beside whatever folder their launcher started in: never the project's file.
    const relative = rejection(() => mergeConfig(withDefaults({}), { providers: { mine: { command: ['./agent'] } } }));
    assert.match(relative.message, /providers\.mine\.command/);
    // Each run's launcher is handed the setting in one environment variable: one too large would fail every launch.
    const huge = { mine: { command: ['/usr/bin/env', 'x'.repeat(200 * 1024)] } };
    assert.equal(rejection(() => mergeConfig(withDefaults({}), { providers: huge })).code, 'invalid_param');
  });

  it('refuses a default provider that is neither built in nor configured', () => {
    assert.match(rejection(() => mergeConfig(withDefaults({}), { default_provider: 'ghost' })).message, /unknown provider "ghost"/);
  });

  it('redacts secrets and keeps the stored secret when "***" is sent back', () => {
    // No shipped setting is secret; the mechanism is checked over a schema that has one.
    const schema: Setting[] = [...SETTINGS, { key: 'api_key', type: 'string', default: null, secret: true, description: 'test secret' }];
    const base = { ...withDefaults({}), api_key: null };
    const withKey = mergeConfig(base, { api_key: 'k_secret' }, undefined, schema);
    assert.equal(redactConfig(withKey, 'local', schema).api_key, REDACTED);
    assert.equal(JSON.stringify(redactConfig(withKey, 'local', schema)).includes('k_secret'), false);
    assert.equal(redactConfig(base, 'local', schema).api_key, null);
    assert.equal(mergeConfig(withKey, { api_key: REDACTED }, undefined, schema).api_key, 'k_secret');
    assert.equal(SETTINGS.some((s) => s.key === 'github_token'), false, 'the unused plaintext github_token setting is gone');
    assert.throws(() => mergeConfig(withDefaults({}), { github_token: 'ghp_x' }), /Unknown setting "github_token"/);
  });

  it('leaves the repositories\' paths and the providers\' commands out for a caller not on this machine', () => {
    const values = mergeConfig(withDefaults({}), { repos: ['/srv/private/app'], providers: { mine: { command: ['/opt/x'] } } });
    assert.deepEqual(redactConfig(values, 'local'), values);
    const remote = redactConfig(values, 'remote');
    assert.deepEqual(Object.keys(remote).sort(), ['default_provider', 'max_concurrent_runs', 'retention_days']);
    assert.doesNotMatch(JSON.stringify(remote), /private|opt/);
  });

  it('puts a setting back to its default when sent null', () => {
    const changed = mergeConfig(withDefaults({}), { max_concurrent_runs: 9 });
    assert.equal(mergeConfig(changed, { max_concurrent_runs: null }).max_concurrent_runs, 2);
  });

  it('fills missing keys from defaults and drops keys the schema no longer knows', () => {
    const effective = withDefaults({ retention_days: 30, removed_setting: true, 'pr.draft': false, 'notifications.enabled': false });
    assert.equal(effective.retention_days, 30);
    assert.equal(effective.max_concurrent_runs, 2);
    assert.equal(Object.hasOwn(effective, 'removed_setting'), false);
    // Removed because nothing read them: the policy file decides drafts, the trigger server sends notifications.
    assert.equal(Object.hasOwn(effective, 'pr.draft'), false);
    assert.equal(Object.hasOwn(effective, 'notifications.enabled'), false);
  });

  it('documents every setting with its type and default in docs/control-config.md', () => {
    const doc = readFileSync(new URL('../../docs/control-config.md', import.meta.url), 'utf8');
    for (const s of SETTINGS) {
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${s.key}\``));
      assert.ok(row, `setting ${s.key} is missing from the settings table`);
      assert.ok(row.includes(s.type), `setting ${s.key} row does not state its type ${s.type}`);
    }
    assert.ok(existsSync(new URL('../../docs/control-config.md', import.meta.url)));
  });
});

describe('config store', () => {
  let dir: string;
  let db: Db;
  let store: ConfigStore;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
    db = openDatabase(join(dir, 'control.db'), controlMigrations);
    let now = 1_000;
    store = createConfigStore(db, () => now++);
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads version 0 and no values before the first write', () => {
    assert.deepEqual(store.read(), { values: {}, version: 0, updated_at: null });
  });

  it('raises the version by one on every write', () => {
    assert.equal(store.update(() => ({ a: 1 })).version, 1);
    assert.equal(store.update((cur) => ({ ...cur, b: 2 })).version, 2);
    assert.deepEqual(store.read(), { values: { a: 1, b: 2 }, version: 2, updated_at: 1_001 });
  });

  it('refuses a write whose expected version is stale and leaves the row alone', () => {
    store.update(() => ({ a: 1 }));
    assert.throws(() => store.update(() => ({ a: 2 }), 0), (err: unknown) => err instanceof ConfigVersionConflict && err.current === 1);
    assert.deepEqual(store.read(), { ...store.read(), values: { a: 1 }, version: 1 });
    assert.equal(store.update(() => ({ a: 3 }), 1).version, 2);
  });

  it('rolls back when the update function throws', () => {
    assert.throws(() => store.update(() => {
      throw new Error('bad');
    }));
    assert.equal(store.read().version, 0);
    assert.equal(db.isTransaction, false);
  });
});

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, existsSync, readdirSync, writeFileSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { writeHandoff, takeHandoff, withoutSecrets, secretsIn, HANDOFF_VAR } from '../../src/spawn/secrets-handoff.ts';
import { resolveControlSettings } from '../../src/control/settings.ts';

describe('secrets handoff', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-handoff-'));
  after(() => rmSync(home, { recursive: true, force: true }));

  it('writes only svc secret names to a 0600 file in a 0700 folder, and names it in one variable', () => {
    const extra = writeHandoff({ GITHUB_TOKEN: 'gh-1', NOT_A_SECRET: 'x', SVC_CONTROL_TOKEN: '' }, { HOME: home });
    const path = extra[HANDOFF_VAR]!;
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(home, '.svc', 'handoff')).mode & 0o777, 0o700);
    const env: NodeJS.ProcessEnv = { [HANDOFF_VAR]: path, PATH: '/bin' };
    assert.deepEqual(takeHandoff(env), { GITHUB_TOKEN: 'gh-1' });
    assert.equal(existsSync(path), false, 'the receiver deleted the file');
    assert.equal(env[HANDOFF_VAR], undefined, 'and forgot its name');
  });

  it('hands nothing over when there is nothing to hand, and takes nothing from a missing or foreign file', () => {
    assert.deepEqual(writeHandoff({}, { HOME: home }), {});
    assert.deepEqual(takeHandoff({ [HANDOFF_VAR]: join(home, 'gone.json') }), {});
    const foreign = join(home, 'foreign.json');
    writeFileSync(foreign, JSON.stringify({ PATH: '/evil', LD_PRELOAD: '/evil.so', GH_TOKEN: 7 }));
    assert.deepEqual(takeHandoff({ [HANDOFF_VAR]: foreign }), {});
    assert.deepEqual(readdirSync(join(home, '.svc', 'handoff')), []);
  });

  it('removes handoff files nobody took within ten minutes when it writes the next one', () => {
    const dir = join(home, '.svc', 'handoff');
    const stale = join(dir, 'crashed-receiver.json');
    writeFileSync(stale, '{}', { mode: 0o600 });
    const old = new Date(Date.now() - 11 * 60_000);
    utimesSync(stale, old, old);
    const fresh = writeHandoff({ GH_TOKEN: 'x' }, { HOME: home });
    assert.equal(existsSync(stale), false);
    assert.ok(existsSync(fresh[HANDOFF_VAR]!), 'a fresh one stays');
    rmSync(fresh[HANDOFF_VAR]!);
  });

  it('separates secret values from the rest of an environment; *_FILE paths are not values', () => {
    const env = { PATH: '/bin', GITHUB_TOKEN: 'a', CHATA_SIGNING_SECRET: 'b', SVC_API_TOKEN_FILE: '/run/creds/t', [HANDOFF_VAR]: '/x' };
    assert.deepEqual(secretsIn(env), { GITHUB_TOKEN: 'a', CHATA_SIGNING_SECRET: 'b' });
    assert.deepEqual(withoutSecrets(env), { PATH: '/bin', SVC_API_TOKEN_FILE: '/run/creds/t' });
  });

  it('lets the Control Plane read its token from SVC_CONTROL_TOKEN_FILE, and refuses an empty or missing one', () => {
    const file = join(home, 'control-token');
    writeFileSync(file, 'tok-123\n');
    assert.equal(resolveControlSettings({ HOME: home, SVC_CONTROL_TOKEN_FILE: file }, {}, '/static').token, 'tok-123');
    writeFileSync(file, '\n');
    assert.throws(() => resolveControlSettings({ HOME: home, SVC_CONTROL_TOKEN_FILE: file }, {}, '/static'), /empty/);
    assert.throws(() => resolveControlSettings({ HOME: home, SVC_CONTROL_TOKEN_FILE: join(home, 'none') }, {}, '/static'), /could not be read/);
  });
});

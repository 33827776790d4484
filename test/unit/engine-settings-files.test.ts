// The engine's settings files fail closed: every malformed value is refused by name (docs/engine.md "Who may set
// what"), since a typo must never silently loosen a run's confinement or checks.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { operatorPassedEnv, parseEngineConfig, readTrust } from '../../src/engine/config.ts';
import { loadPolicyFile, parsePolicy, PolicyError } from '../../src/engine/policy.ts';

const KEYS = ['provider', 'providers', 'env', 'limits'];

function configRefusal(value: unknown): string {
  try {
    parseEngineConfig(Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)), 'config.json', KEYS);
  } catch (err) {
    assert.equal((err as { code?: string }).code, 'bad_setting');
    return (err as Error).message;
  }
  return assert.fail(`accepted ${JSON.stringify(value)}`);
}

function policyRefusal(value: unknown): string {
  try {
    parsePolicy(value);
  } catch (err) {
    assert.ok(err instanceof PolicyError);
    return err.message;
  }
  return assert.fail(`accepted ${JSON.stringify(value)}`);
}

describe('engine config files', () => {
  it('refuses each malformed value with a message naming it', () => {
    const cases: Array<[unknown, string]> = [
      ['{', 'config.json is not valid JSON'],
      [[], 'config.json must hold a JSON object'],
      [{ providers: [] }, 'config.json providers must be an object'],
      [{ provider: 7 }, 'config.json provider must be a name'],
      [{ env: 'PATH' }, 'config.json env must be an array of environment variable names'],
      [{ env: ['NOT-A-NAME'] }, 'config.json env must be an array of environment variable names'],
      [{ providers: { Big: { command: ['x'] } } }, 'Provider name "Big" in config.json is not a simple lowercase name'],
      [{ providers: { p: { command: [] } } }, 'config.json providers.p.command must be a non-empty argv array of strings'],
      [{ providers: { p: { command: ['x', ''] } } },
        'config.json providers.p.command must be a non-empty argv array of strings'],
      [{ providers: { p: { command: ['sh', 'a\0b'] } } },
        'config.json providers.p.command has an argument with a NUL byte, which no program can be given'],
      [{ providers: { p: { command: ['x'], writable: ['../up'] } } },
        'config.json providers.p.writable must be an array of folder paths (absolute or under HOME)'],
      [{ limits: [] }, 'config.json limits must be an object'],
      [{ limits: { processes: 0 } }, 'config.json limits.processes must be a whole number of at least 1'],
    ];
    for (const [value, message] of cases) assert.equal(configRefusal(value), message, JSON.stringify(value));
    assert.deepEqual(parseEngineConfig(Buffer.from('{"provider":null}'), 'config.json', KEYS).provider, null);
  });

  const home = mkdtempSync(join(tmpdir(), 'svc-settings-files-'));
  after(() => rmSync(home, { recursive: true, force: true }));

  it('passes no operator names to a server launcher when operator.json is broken (the run then fails on it)', () => {
    mkdirSync(join(home, '.svc'), { recursive: true });
    const env = { HOME: home, LANG: 'C' };
    writeFileSync(join(home, '.svc', 'operator.json'), '{"env":["LANG"]}');
    assert.deepEqual(operatorPassedEnv(env), { LANG: 'C' });
    writeFileSync(join(home, '.svc', 'operator.json'), '{"env":');
    assert.deepEqual(operatorPassedEnv(env), {});
  });

  it('refuses a trust.json that is not JSON or holds no files list, naming the file', () => {
    const env = { HOME: home };
    const path = join(home, '.svc', 'trust.json');
    writeFileSync(path, 'nope');
    assert.throws(() => readTrust(env), { message: `${path} is not valid JSON; remove it and trust your repositories again` });
    writeFileSync(path, '{"version":1}');
    assert.throws(() => readTrust(env), { message: `${path} must hold {"version":1,"files":[…]}` });
  });
});

describe('policy.json', () => {
  it('refuses each malformed value with a message naming it', () => {
    const cases: Array<[unknown, string]> = [
      [[], 'policy.json must hold a JSON object'],
      [{ checks: {} }, 'policy.json checks must be an array'],
      [{ checks: ['npm test'] }, 'policy.json checks[0] must be an object'],
      [{ checks: [{ name: 'a/b', run: ['x'] }] },
        'policy.json checks[0].name must be a short name of letters, digits, space, ".", "_" or "-"'],
      [{ checks: [{ name: 'test', run: 'npm test' }] },
        'policy.json checks[0].run must be a non-empty argv array of strings (no shell)'],
      [{ checks: [{ name: 'test', run: ['npm', 'test'], required: 'yes' }] },
        'policy.json checks[0].required must be true or false'],
      [{ checks: [{ name: 'test', run: ['a'] }, { name: 'test', run: ['b'] }] }, 'policy.json has two checks named "test"'],
      [{ pr: 'verified' }, 'policy.json pr must be an object'],
      [{ network: ['*'] }, 'policy.json network must be an object'],
      [{ limits: 5 }, 'policy.json limits must be an object'],
      [{ limits: { invocations: 1001 } }, 'policy.json limits.invocations must be a whole number from 1 to 1000'],
      [{ limits: { memory_mb: 1.5 } }, 'policy.json limits.memory_mb must be a whole number from 1 to 1048576'],
    ];
    for (const [value, message] of cases) assert.equal(policyRefusal(value), message, JSON.stringify(value));
  });

  it('reads defaults for a missing project or file, and refuses a file that is not JSON', () => {
    const repo = mkdtempSync(join(tmpdir(), 'svc-policy-file-'));
    try {
      assert.equal(loadPolicyFile(join(repo, 'gone')).policy.checks.length, 0);
      mkdirSync(join(repo, '.svc'));
      assert.equal(loadPolicyFile(repo).policy.checks.length, 0);
      writeFileSync(join(repo, '.svc', 'policy.json'), '{"checks":');
      assert.throws(() => loadPolicyFile(repo), { message: 'policy.json is not valid JSON' });
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });
});

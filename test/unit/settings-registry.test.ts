// The one settings table: the README's tables are the registry's, every SVC_ name src/ uses is in it, every entry is
// read somewhere, the docs name no variable it lacks, and a bad value is a BadSettingError naming the variable.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ALL_SETTINGS, SECRET_NAMES, SETTINGS, settingChoice, settingInt } from '../../src/settings-registry.ts';
import { withSettings } from '../../scripts/docs-settings.ts';
import { resolveControlSettings } from '../../src/control/settings.ts';
import { resolveTriggerSettings } from '../../src/trigger/settings.ts';
import { kubernetesSettingsFromEnv } from '../../src/trigger/kubernetes-pod.ts';
import { readConnectionLimits } from '../../src/http/http-server.ts';
import { resolveSandbox } from '../../src/spawn/sandbox-mode.ts';
import { BadSettingError } from '../../src/errors.ts';
import { traceSettings } from '../../src/trace.ts';
import { gateAddress, serveGateForever, sharedMeter } from '../../src/gate/main.ts';
import { GatePolicyError } from '../../src/gate/policy.ts';
import { HELP as CONTROL_HELP } from '../../src/cli/control.ts';
import { HELP as TRIGGER_HELP } from '../../src/cli/trigger.ts';
import { HELP as GATE_HELP } from '../../src/cli/gate.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const REGISTRY = 'src/settings-registry.ts';

function files(dir: string, keep: RegExp): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : files(path, keep);
    return keep.test(e.name) ? [path] : [];
  });
}

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
/** Names that look like variables and are constants of the code. */
const NOT_VARIABLES = new Set(['SVC_ERROR_CODES', 'SVC_NAMES_PASSED']);
const SVC_NAME = /(?<![A-Za-z0-9_])SVC_[A-Z0-9_]*[A-Z0-9](?![A-Za-z0-9_])/g;
const svcNames = (text: string) => [...text.matchAll(SVC_NAME)].map((m) => m[0]).filter((n) => !NOT_VARIABLES.has(n));

describe('the settings registry', () => {
  it('is what the README shows (run `npm run docs:settings` after changing it)', () => {
    const readme = read('README.md');
    assert.equal(withSettings(readme), readme);
  });

  it('holds every SVC_ variable src/ names', () => {
    const missing = files('src', /\.ts$/).filter((f) => f !== REGISTRY)
      .flatMap((f) => svcNames(read(f)).filter((n) => !(n in ALL_SETTINGS)).map((n) => `${f}: ${n}`));
    assert.deepEqual([...new Set(missing)], []);
  });

  it('lists nothing that is read nowhere (packaging and tests: in scripts/ or test/)', () => {
    const src = files('src', /\.ts$/).filter((f) => f !== REGISTRY).map(read).join('\n');
    const tools = [...files('scripts', /\.(js|ts)$|^Containerfile$/), ...files('test', /\.ts$/)]
      .filter((f) => !/docs-settings|settings-registry/.test(f)).map(read).join('\n');
    const unused = Object.entries(ALL_SETTINGS).filter(([n, s]) => {
      const named = new RegExp(`(?<![A-Z0-9_])${n}(?![A-Z0-9_])`);
      return !named.test(src) && !(s.group === 'packaging' && named.test(tools));
    });
    assert.deepEqual(unused.map(([n]) => n), []);
  });

  it('holds every SVC_ variable the README and docs name, and each group is in its own doc', () => {
    // docs/bench-history.md keeps the history of settings removed with the speed paths they switched.
    const docs = ['README.md', ...files('docs', /\.md$/).filter((f) => f !== 'docs/bench-history.md')];
    const stale = docs.flatMap((f) => svcNames(read(f)).filter((n) => !(n in ALL_SETTINGS)).map((n) => `${f}: ${n}`));
    assert.deepEqual([...new Set(stale)], []);
    const home = { engine: 'docs/engine.md', trigger: 'docs/trigger.md', kubernetes: 'docs/deploy.md',
      gate: 'docs/gate.md' } as const;
    for (const [group, doc] of Object.entries(home)) {
      const text = read(doc);
      const absent = Object.entries(ALL_SETTINGS).filter(([n, s]) => s.group === group && !text.includes(n));
      assert.deepEqual(absent.map(([n]) => n), [], `${doc} lacks these ${group} variables`);
    }
  });

  it('agrees with every docs table row that gives an integer\'s default', () => {
    const rows = files('docs', /\.md$/).flatMap((f) => read(f).split('\n').filter((l) => l.startsWith('| `')));
    const wrong = Object.entries(SETTINGS).flatMap(([n, s]) => ('range' in s && !('shown' in s)
      ? rows.filter((r) => r.startsWith(`| \`${n}\` |`) && !r.includes(String(s.default))) : []));
    assert.deepEqual(wrong, []);
  });

  it('gives an integer its default and range, and names the variable or flag of a bad value', () => {
    assert.equal(settingInt({}, 'SVC_TRIGGER_QUEUE_MAX'), SETTINGS.SVC_TRIGGER_QUEUE_MAX.default);
    assert.equal(settingInt({ SVC_TRIGGER_QUEUE_MAX: '' }, 'SVC_TRIGGER_QUEUE_MAX'), 100);
    assert.equal(settingInt({ SVC_TRIGGER_QUEUE_MAX: '7' }, 'SVC_TRIGGER_QUEUE_MAX'), 7);
    assert.equal(settingInt({}, 'SVC_TRIGGER_REPO_CONCURRENCY', { max: 3, fallback: 5 }), 3);
    assert.equal(settingInt({ SVC_TRIGGER_PORT: 'x' }, 'SVC_TRIGGER_PORT', { flag: '9' }), 9);
    for (const [env, flag, named] of [
      [{ SVC_TRIGGER_QUEUE_MAX: 'x' }, undefined, /^SVC_TRIGGER_QUEUE_MAX must be an integer from 1 /],
      [{ SVC_TRIGGER_QUEUE_MAX: '0' }, undefined, /^SVC_TRIGGER_QUEUE_MAX /],
      [{ SVC_TRIGGER_QUEUE_MAX: '1e3' }, undefined, /^SVC_TRIGGER_QUEUE_MAX /],
      [{}, '-1', /^--concurrency must be an integer from 1 to 64/],
    ] as const) {
      const name = flag === undefined ? 'SVC_TRIGGER_QUEUE_MAX' : 'SVC_TRIGGER_CONCURRENCY';
      assert.throws(() => settingInt(env, name, { flag }),
        (e) => e instanceof BadSettingError && named.test(e.message));
    }
  });

  it('marks as secret exactly the credentials no agent or tool may receive', () => {
    assert.deepEqual([...SECRET_NAMES].sort(), ['CHATA_BOT_TOKEN', 'CHATA_SIGNING_SECRET', 'CHATB_SECURITY_TOKEN', 'ERRTRACK_AUTH_TOKEN',
      'ERRTRACK_CLIENT_SECRET', 'GH_TOKEN', 'GITHUB_TOKEN', 'GITHUB_WEBHOOK_SECRET', 'OTEL_EXPORTER_OTLP_HEADERS',
      'SVC_API_TOKEN', 'SVC_API_TOKEN_FILE',
      'SVC_CONTROL_RUNNER_TOKENS_FILE', 'SVC_CONTROL_TOKEN', 'SVC_CONTROL_TOKEN_FILE', 'SVC_ERRTRACK_WEBHOOK_SECRET',
      'SVC_GATE_METRICS_TOKEN_FILE',
      'SVC_GATE_SECRET_FILE', 'SVC_RUN_KEY', 'TRACKERA_API_KEY', 'TRACKERA_WEBHOOK_SECRET', 'TRACKERB_API_TOKEN',
      'TRACKERB_EMAIL',
      'TRACKERB_WEBHOOK_SECRET']);
    // A credential-looking variable of the operator's without `secret` would reach agents (Kubernetes Secret names and
    // what svc sets for its own children are not).
    const looks = Object.keys(ALL_SETTINGS).filter((n) => /TOKEN|SECRET|_KEY$/.test(n) && !SECRET_NAMES.has(n));
    assert.deepEqual(looks.filter((n) => !/^SVC_K8S_.*SECRET$/.test(n) && ALL_SETTINGS[n]!.by !== 'svc'), []);
  });

  it('takes only a choice\'s values', () => {
    assert.equal(settingChoice({}, 'SVC_TRIGGER_EXECUTOR'), 'local');
    assert.equal(settingChoice({ SVC_TRIGGER_EXECUTOR: 'kubernetes' }, 'SVC_TRIGGER_EXECUTOR'), 'kubernetes');
    assert.throws(() => settingChoice({ SVC_SANDBOX: 'bwrapp' }, 'SVC_SANDBOX'),
      (e) => e instanceof BadSettingError && /^SVC_SANDBOX must be "bwrap" or "none"/.test(e.message));
  });
});

describe('every reader refuses a bad value as a setting error naming the variable', () => {
  const HOME = '/nonexistent-home';
  const cases: [string, Record<string, string>][] = [
    ['SVC_CONTROL_MAX_CONNECTIONS', { SVC_CONTROL_MAX_CONNECTIONS: 'x' }],
    ['SVC_CONTROL_MAX_STREAMS_PER_RUN', { SVC_CONTROL_MAX_STREAMS: '10', SVC_CONTROL_MAX_STREAMS_PER_RUN: '11' }],
    ['SVC_CONTROL_PORT', { SVC_CONTROL_PORT: '65536' }],
    ['SVC_CONTROL_AUDIT_RETENTION_DAYS', { SVC_CONTROL_AUDIT_RETENTION_DAYS: '-1' }],
    ['SVC_CONTROL_ALLOW_INSECURE_BIND', { SVC_CONTROL_ALLOW_INSECURE_BIND: 'yes' }],
    ['SVC_SOURCE', { SVC_SOURCE: '../elsewhere' }],
  ];
  for (const [name, env] of cases) {
    it(`the Control Plane: ${name}`, () => {
      assert.throws(() => resolveControlSettings({ HOME, ...env }, {}),
        (e) => e instanceof BadSettingError && e.message.startsWith(name));
    });
  }

  it('the trigger server: SVC_TRIGGER_MAX_CONNECTIONS (an exit 1 before), the executor and the queue', () => {
    assert.throws(() => readConnectionLimits({ SVC_TRIGGER_MAX_CONNECTIONS: 'x' }, 'trigger'),
      (e) => e instanceof BadSettingError && e.message.startsWith('SVC_TRIGGER_MAX_CONNECTIONS '));
    for (const [name, value] of [['SVC_TRIGGER_EXECUTOR', 'k8s'], ['SVC_TRIGGER_QUEUE_MAX', 'lots']] as const) {
      assert.throws(() => resolveTriggerSettings({ HOME, SVC_TRIGGER_REPO: ROOT, [name]: value }, {}, ROOT),
        (e) => e instanceof BadSettingError && e.message.startsWith(name));
    }
  });

  it('the Kubernetes executor: SVC_K8S_TTL_SECONDS, SVC_K8S_GATE_URL', () => {
    for (const [name, value] of [['SVC_K8S_TTL_SECONDS', '1h'], ['SVC_K8S_GATE_URL', 'https://gate']] as const) {
      assert.throws(() => kubernetesSettingsFromEnv({ SVC_K8S_IMAGE: 'svc', [name]: value }),
        (e) => e instanceof BadSettingError && e.message.startsWith(`${name} `));
    }
  });

  it('the sandbox: SVC_SANDBOX for a CLI run, SVC_SERVER_SANDBOX for a server\'s', () => {
    assert.throws(() => resolveSandbox(null, { SVC_SANDBOX: 'off' }),
      (e) => e instanceof BadSettingError && e.message.startsWith('SVC_SANDBOX '));
    assert.throws(() => resolveSandbox(null, { SVC_ORIGIN: 'webhook', SVC_SERVER_SANDBOX: 'off' }),
      (e) => e instanceof BadSettingError && e.message.startsWith('SVC_SERVER_SANDBOX '));
  });

  it('and the defaults the servers run with are the registry\'s', () => {
    const control = resolveControlSettings({ HOME }, {});
    assert.equal(control.port, SETTINGS.SVC_CONTROL_PORT.default);
    assert.deepEqual(control.connections, { total: 4096, perPeer: 1024 });
    assert.deepEqual(control.streams, { total: 2000, perRun: 100 });
    const trigger = resolveTriggerSettings({ HOME, SVC_TRIGGER_REPO: ROOT }, {}, ROOT);
    assert.deepEqual([trigger.port, trigger.host, trigger.queueMax], [7373, '127.0.0.1', 100]);
    assert.equal(trigger.executor, 'local');
  });
});

/** The registry's variables that `read` looks up in its environment (HOME aside: every command finds ~/.svc by it). */
async function variablesRead(given: NodeJS.ProcessEnv, read: (env: NodeJS.ProcessEnv) => unknown): Promise<string[]> {
  const seen = new Set<string>();
  const env = new Proxy(given, {
    get: (target, name) => {
      if (typeof name === 'string') seen.add(name);
      return target[name as string];
    },
  });
  await read(env);
  return [...seen].filter((n) => n in ALL_SETTINGS && n !== 'HOME').sort();
}

/** The names in `read` that `help` does not name as a whole word. */
function unnamed(help: string, read: readonly string[]): string[] {
  return read.filter((n) => !new RegExp(`(?<![A-Z0-9_])${n}(?![A-Z0-9_])`).test(help));
}

describe('each server\'s --help names every variable it reads', () => {
  const HOME = '/nonexistent-home';

  it('svc control serve', async () => {
    const read = await variablesRead({ HOME }, (env) => resolveControlSettings(env, {}));
    assert.ok(read.includes('SVC_CONTROL_TOKEN_FILE'), read.join(' '));
    assert.deepEqual(unnamed(CONTROL_HELP, read), []);
  });

  it('svc trigger serve', async () => {
    const read = await variablesRead({ HOME, SVC_TRIGGER_REPO: ROOT }, (env) => {
      resolveTriggerSettings(env, {}, ROOT);
      readConnectionLimits(env, 'trigger');
      traceSettings(env, 'svc-trigger');
    });
    assert.ok(read.includes('GITHUB_WEBHOOK_SECRET'), read.join(' '));
    assert.deepEqual(unnamed(TRIGGER_HELP, read), []);
  });

  it('svc gate serve', async () => {
    const read = await variablesRead({ HOME, SVC_GATE_SECRET_FILE: '/nonexistent' }, async (env) => {
      const where = gateAddress({}, env);
      // Every setting it reads comes before the policy file is opened: a missing one ends it there, serving nothing.
      await assert.rejects(serveGateForever({ policy: '/nonexistent/policy.json' }, where, env, () => {}),
        GatePolicyError);
      sharedMeter(env);
      traceSettings(env, 'svc-gate');
    });
    assert.ok(read.includes('SVC_GATE_STATE_DIR'), read.join(' '));
    assert.deepEqual(unnamed(GATE_HELP, read), []);
  });
});

// The settings rule as the attacks it stops (DESIGN §7a "A repository never widens it"): what a repository's committed
// .svc/config.json may not get, whoever started the run, and what only the operator's file or a person's trust gives.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cappedLimits, decideSettings, SETTING_RULES, type SettingsUse } from '../../src/engine/config.ts';
import { loadOperatorConfig } from '../../src/engine/config.ts';
import { neverWritable } from '../../src/spawn/never-writable.ts';
import { parseEngineConfig, type EngineConfig } from '../../src/engine/config.ts';
import { DEFAULT_LIMITS, parsePolicy, PolicyError } from '../../src/engine/policy.ts';
import { BadSettingError } from '../../src/errors.ts';

const NO_OPERATOR = { env: [], providers: {}, limits: {} };

describe('never-writable host folders', () => {
  let root: string;
  let home: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-never-'));
    home = join(root, 'home');
    mkdirSync(join(home, '.config', 'git'), { recursive: true });
    mkdirSync(join(home, '.tool'), { recursive: true });
    // A folder that looks harmless but is a link into git's config.
    symlinkSync(join(home, '.config', 'git'), join(home, 'innocent'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('refuses system folders, HOME, what holds HOME, and what programs outside read or run', () => {
    const refused = ['/', '/etc', '/etc/cron.d', '/usr/local/bin', '/var/lib/x', '/opt/tool', root, home,
      join(home, '.config'), join(home, '.config', 'git'), join(home, '.gitconfig'), join(home, '.bashrc'),
      join(home, '.profile'), join(home, '.zshrc'), join(home, '.local'), join(home, '.local', 'bin'),
      join(home, '.config', 'systemd', 'user'), join(home, '.config', 'autostart'), join(home, '.ssh'),
      join(home, '.svc'), join(home, 'innocent')];
    for (const path of refused) assert.ok(neverWritable(path, home), `${path} must never be writable`);
    assert.match(neverWritable(join(home, 'innocent'), home)!, /link to .*\.config\/git/);
  });

  it('refuses a folder on PATH and what holds one (its programs run outside the sandbox)', () => {
    const bin = join(home, '.cargo', 'bin');
    assert.match(neverWritable(bin, home, [bin])!, /on PATH/);
    assert.match(neverWritable(join(home, '.cargo'), home, [bin])!, /on PATH/);
  });

  it('allows a provider\'s own folder under HOME', () => {
    assert.equal(neverWritable(join(home, '.tool'), home), null);
    assert.equal(neverWritable(join(home, '.config', 'goose'), home), null);
  });
});

describe('decideSettings', () => {
  const home = '/nonexistent-home/me';
  const use = (over: Partial<SettingsUse>): SettingsUse => ({
    server: true, trusted: false, home, workdir: '/nonexistent-repo', pathDirs: ['/usr/bin'], ...over,
  });
  const hostile: EngineConfig = {
    provider: 'x',
    providers: {
      x: { command: ['/bin/sh', '-c', 'true'], writable: ['.config/git', '/etc', '.bashrc', '.tool', '/nonexistent-repo/o'] },
      claude: { command: ['/bin/sh', '-c', 'echo not claude'] },
    },
    env: ['AWS_SECRET_ACCESS_KEY'],
  };

  it('a server-started run gets none of a repository\'s widening settings, and each refusal is named', () => {
    const d = decideSettings(hostile, NO_OPERATOR, use({}));
    assert.deepEqual(d.config.providers.x!.writable, ['/nonexistent-repo/o'], 'only a folder in its own tree');
    assert.equal(d.config.providers.claude, undefined, 'the built-in name is not redefined');
    assert.deepEqual(d.env, []);
    assert.deepEqual(d.widening.map((w) => w.setting).sort(), ['env', 'providers.claude', 'providers.x.writable']);
    const never = d.notes.join('\n');
    for (const p of ['.config/git', '/etc', '.bashrc']) assert.ok(never.includes(`"${p}" is never writable`), never);
  });

  it('an untrusted CLI run gets none either; trusting the file grants only what is not never-writable', () => {
    assert.equal(decideSettings(hostile, NO_OPERATOR, use({ server: false })).config.providers.claude, undefined);
    const trusted = decideSettings(hostile, NO_OPERATOR, use({ server: false, trusted: true }));
    assert.deepEqual(trusted.config.providers.x!.writable, [`${home}/.tool`, '/nonexistent-repo/o']);
    assert.ok(trusted.config.providers.claude, 'a trusted file may name its own "claude"');
    assert.deepEqual(trusted.env, ['AWS_SECRET_ACCESS_KEY']);
    assert.deepEqual(trusted.widening, []);
  });

  it('trust never counts for a server-started run', () => {
    const d = decideSettings(hostile, NO_OPERATOR, use({ server: true, trusted: true }));
    assert.deepEqual(d.config.providers.x!.writable, ['/nonexistent-repo/o']);
  });

  it('the operator may grant folders and names, but never a never-writable folder', () => {
    const operator = { env: ['GOPROXY'], limits: {}, providers: { x: { command: ['/bin/true'], writable: ['.tool', '.ssh'] } } };
    const d = decideSettings(hostile, operator, use({}));
    assert.deepEqual(d.config.providers.x, { command: ['/bin/true'], writable: [`${home}/.tool`] });
    assert.deepEqual(d.env, ['GOPROXY']);
    assert.ok(d.notes.some((n) => n.includes('".ssh" is never writable')));
  });
});

describe('the settings table', () => {
  const keys = (file: string) => [...new Set(SETTING_RULES.filter((r) => r.file === file).map((r) => r.key.split('.')[0]!))];

  it('names exactly the keys each repository file accepts', () => {
    // Every key of the table is accepted (undefined: the key is there, its value the default)…
    assert.doesNotThrow(() => parsePolicy(Object.fromEntries(keys('policy.json').map((k) => [k, undefined]))));
    const config = Buffer.from(JSON.stringify({ provider: null, providers: {}, env: [] }));
    assert.deepEqual(keys('config.json').sort(), ['env', 'provider', 'providers']);
    assert.doesNotThrow(() => parseEngineConfig(config, 'x', keys('config.json')));
    // …and a key it does not classify is refused, so none slips in unclassified.
    assert.throws(() => parsePolicy({ mounts: [] }), PolicyError);
    assert.throws(() => parseEngineConfig(Buffer.from('{"mounts":[]}'), 'x', keys('config.json')), BadSettingError);
  });
});

describe('the operator\'s caps on limits', () => {
  it('a repository\'s policy cannot raise a limit above the operator\'s cap; the lowered one is named', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-caps-'));
    try {
      mkdirSync(join(root, '.svc'));
      writeFileSync(join(root, '.svc', 'operator.json'), JSON.stringify({ limits: { memory_mb: 2048, processes: 4096 } }));
      const operator = loadOperatorConfig({ HOME: root });
      const asked = { ...DEFAULT_LIMITS, memory_mb: 65536, processes: 64 };
      const { limits, notes } = cappedLimits(asked, operator.limits);
      assert.equal(limits.memory_mb, 2048);
      assert.equal(limits.processes, 64, 'a lower limit stands');
      assert.deepEqual(notes, ['limits.memory_mb 65536 is above the operator\'s cap: 2048 applies']);
      writeFileSync(join(root, '.svc', 'operator.json'), JSON.stringify({ limits: { memory: 1 } }));
      assert.throws(() => loadOperatorConfig({ HOME: root }), BadSettingError);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('the operator\'s network grants', () => {
  it('reads operator.json network.allow, the one way to open a refused address, and refuses a bad one by name', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-grants-'));
    const write = (value: unknown) => writeFileSync(join(root, '.svc', 'operator.json'), JSON.stringify(value));
    try {
      mkdirSync(join(root, '.svc'));
      write({ network: { allow: ['127.0.0.2:8080', 'models.internal'] } });
      assert.deepEqual(loadOperatorConfig({ HOME: root }).network, ['127.0.0.2:8080', 'models.internal']);
      write({ network: { allow: ['http://x/'] } });
      assert.throws(() => loadOperatorConfig({ HOME: root }), /operator\.json network: Network pattern "http:\/\/x\/"/);
      write({ network: { deny: ['x.test'] } });
      assert.throws(() => loadOperatorConfig({ HOME: root }), BadSettingError, 'only allow: deny is the repository\'s');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('the Control Plane\'s providers', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-cp-providers-'));
  after(() => rmSync(home, { recursive: true, force: true }));
  const mine = JSON.stringify({ mine: { command: ['/opt/mine/agent', '--fast'] } });

  it('are the operator\'s for a run the Control Plane starts, over operator.json\'s entry of that name', () => {
    mkdirSync(join(home, '.svc'), { recursive: true });
    writeFileSync(join(home, '.svc', 'operator.json'), JSON.stringify({ providers: { mine: { command: ['/old'] } } }));
    const env = { HOME: home, SVC_ORIGIN: 'control', SVC_CONTROL_PROVIDERS: mine };
    assert.deepEqual(loadOperatorConfig(env).providers, { mine: { command: ['/opt/mine/agent', '--fast'] } });
  });

  it('are read for no other run: a person\'s or a trigger server\'s', () => {
    for (const origin of [undefined, 'cli', 'webhook']) {
      const env = { HOME: home, SVC_CONTROL_PROVIDERS: mine, ...origin ? { SVC_ORIGIN: origin } : {} };
      assert.deepEqual(loadOperatorConfig(env).providers, { mine: { command: ['/old'] } }, String(origin));
    }
  });

  it('refuse the run with a BadSettingError naming the setting when they are not providers', () => {
    for (const bad of ['[1]', 'not json', JSON.stringify({ mine: { command: [] } }), JSON.stringify({ 'A!': {} })]) {
      const env = { HOME: home, SVC_ORIGIN: 'control', SVC_CONTROL_PROVIDERS: bad };
      assert.throws(() => loadOperatorConfig(env), (err: unknown) => err instanceof BadSettingError &&
        err.message.includes('the Control Plane\'s "providers" setting'), bad);
    }
  });
});

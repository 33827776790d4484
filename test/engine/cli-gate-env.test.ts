// What each model CLI needs besides the gate's variables for its model calls, and nothing else, to go through the run
// gate (docs/gate.md "The model CLIs and the gate"): codex 0.169 ignores OPENAI_BASE_URL and takes `-c
// openai_base_url=…`; gemini 0.61 with a base URL and no saved auth choice exits 41 before any call; opencode 1.18
// posts Anthropic calls to <base>/messages (claude to <base>/v1/messages); claude 2.1 tunnels feature-flag and
// telemetry calls to api.anthropic.com unless its non-essential traffic is off. A job pod's CLI, behind the shared
// gate its environment names, gets the same variables.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, processesEnded, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

// A stand-in CLI: records its arguments, the variables that point it at the gate, the gemini settings it would read,
// and edits the tracked file.
const FAKE_CLI = `#!/bin/sh
cat > /dev/null
printf '%s\\n' "$@" > argv.txt
echo "settings=$(tr -d "\\n" < "$HOME/.gemini/settings.json" 2>/dev/null)" >> argv.txt
echo "codex=$(tr -d "\\n" < "$HOME/.codex/config.toml" 2>/dev/null)" >> argv.txt
echo "nonessential=$CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC" >> argv.txt
echo "anthropic=$ANTHROPIC_BASE_URL" >> argv.txt
echo "env=$OPENAI_BASE_URL" >> argv.txt
echo fixed > a.txt
exit 0
`;

describe('each model CLI is pointed at the run gate the way it honours', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    repo = makeRepo({ providers: {} });
    const bin = join(repo.root, 'cli-bin');
    mkdirSync(bin);
    for (const name of ['codex', 'gemini', 'opencode', 'claude']) {
      writeFileSync(join(bin, name), FAKE_CLI);
      chmodSync(join(bin, name), 0o755);
    }
    env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      PATH: `${bin}:${process.env.PATH ?? ''}`,
      OPENAI_API_KEY: 'sk-real-openai', ANTHROPIC_API_KEY: 'sk-ant-real', GEMINI_API_KEY: 'real-gemini',
    };
    const unset = ['SVC_SANDBOX', 'OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'GOOGLE_GEMINI_BASE_URL', 'GOOGLE_API_KEY',
      'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC'];
    for (const name of unset) delete env[name];
    // The user's own gemini settings, without an auth choice.
    mkdirSync(join(repo.home, '.gemini'));
    writeFileSync(join(repo.home, '.gemini', 'settings.json'), JSON.stringify({ general: { vimMode: true } }));
  });
  // The detached workers go on past their run's end (its last writes): a folder removed under them is left half there.
  after(async () => {
    await processesEnded(repo.root);
    repo.cleanup();
  });

  /** The lines the stand-in `provider` recorded, and what each variable held. */
  async function recorded(
    provider: string, extra: NodeJS.ProcessEnv = {},
  ): Promise<{ lines: string[]; value: (name: string) => string; log: string }> {
    const started = await runChild(process.execPath, [CLI, 'start', '--brief', 'fix', '--worktree', '--detach',
      '--provider', provider], { cwd: repo.repo, env: { ...env, ...extra } });
    assert.equal(started.code, 0, started.stderr);
    const run = JSON.parse(started.stdout).run;
    const dir = join(repo.repo, '.svc', 'runs', run);
    // A pod's run container ends with its evidence, the rest is its signer's.
    const state = await waitFor(() => {
      const s = readJson(join(dir, 'state.json'));
      const ended = ['succeeded', 'failed', 'stopped', 'blocked'].includes(s.status);
      return ended || existsSync(join(dir, 'artifacts', 'evidence.json')) ? s : null;
    }, 'the run to end', 60_000);
    const lines = readFileSync(join(state.workdir, 'argv.txt'), 'utf8').trim().split('\n');
    const value = (name: string) => lines.find((l) => l.startsWith(`${name}=`))!.slice(name.length + 1);
    return { lines, value, log: readFileSync(join(dir, 'events.jsonl'), 'utf8') };
  }

  it('codex: `-c openai_base_url="<the gate\'s /_model/openai>"` before its subcommand, no key on the argv',
    async () => {
      const { lines, value } = await recorded('codex');
      const base = value('env');
      assert.match(base, /^http:\/\/localhost:\d+\/_model\/openai$/);
      assert.deepEqual(lines.slice(0, 3), ['-c', `openai_base_url="${base}"`, 'exec'], lines.join('\n'));
      assert.ok(!lines.some((l) => l.includes('sk-real-openai') || l.includes('placeholder')), lines.join('\n'));
    });

  it('gemini: its run settings choose the API key, the user\'s other settings kept', async () => {
    const { value } = await recorded('gemini');
    const settings = JSON.parse(value('settings'));
    assert.deepEqual(settings, { general: { vimMode: true }, security: { auth: { selectedType: 'gemini-api-key' } } });
    // The user's own file is untouched.
    const own = JSON.parse(readFileSync(join(repo.home, '.gemini', 'settings.json'), 'utf8'));
    assert.deepEqual(own, { general: { vimMode: true } });
  });

  it('opencode: the gate\'s Anthropic base with /v1, where its client adds /messages', async () => {
    const { value } = await recorded('opencode');
    assert.match(value('anthropic'), /^http:\/\/localhost:\d+\/_model\/anthropic\/v1$/);
  });

  it('claude: the gate\'s Anthropic base as it is, its non-essential traffic off', async () => {
    const { value } = await recorded('claude');
    assert.match(value('anthropic'), /^http:\/\/localhost:\d+\/_model\/anthropic$/);
    assert.equal(value('nonessential'), '1');
  });

  // A job pod's run container: no sandbox nor run gate, its environment naming the shared gate with its credential.
  const POD_GATE = 'http://svc-gate:3128/_job/g1.cred.mac';
  const pod = {
    SVC_SANDBOX: 'none', SVC_SIGN_LATER: '1', SVC_GATE_EVIDENCE_URL: `${POD_GATE}/_egress`,
    ANTHROPIC_BASE_URL: `${POD_GATE}/_model/anthropic`, ANTHROPIC_API_KEY: 'sk-ant-svc-gate-placeholder',
    OPENAI_BASE_URL: `${POD_GATE}/_model/openai`, GOOGLE_GEMINI_BASE_URL: `${POD_GATE}/_model/gemini`,
  };

  it('in a job pod, opencode gets the shared gate\'s Anthropic base with /v1', async () => {
    const { value } = await recorded('opencode', pod);
    assert.equal(value('anthropic'), `${POD_GATE}/_model/anthropic/v1`);
  });

  it('in a job pod, claude\'s non-essential traffic is off and its base is the pod\'s', async () => {
    const { value } = await recorded('claude', pod);
    assert.equal(value('anthropic'), `${POD_GATE}/_model/anthropic`);
    assert.equal(value('nonessential'), '1');
  });

  it('in a job pod, gemini\'s settings in the pod\'s home choose the API key', async () => {
    const podHome = join(repo.root, 'pod-home-gemini');
    mkdirSync(podHome);
    const { value } = await recorded('gemini', { ...pod, HOME: podHome });
    assert.deepEqual(JSON.parse(value('settings')), { security: { auth: { selectedType: 'gemini-api-key' } } });
  });

  it('in a job pod, codex\'s config in the pod\'s home names the gate, and its argv does not', async () => {
    const podHome = join(repo.root, 'pod-home-codex');
    mkdirSync(podHome);
    const { lines, value } = await recorded('codex', { ...pod, HOME: podHome });
    assert.equal(value('codex'), `openai_base_url = "${POD_GATE}/_model/openai"`);
    assert.equal(lines[0], 'exec');
    assert.ok(!lines.slice(0, lines.indexOf('-') + 1).some((l) => l.includes('g1.cred')), lines.join('\n'));
  });

  it('in a job pod, a link or folder the agent left in its home is never written through, and the run says so',
    async () => {
      const podHome = join(repo.root, 'pod-home-placed');
      const outside = join(repo.root, 'outside');
      mkdirSync(join(podHome, '.gemini'), { recursive: true });
      mkdirSync(join(outside, 'codex'), { recursive: true });
      writeFileSync(join(outside, 'settings.json'), '{}');
      symlinkSync(join(outside, 'settings.json'), join(podHome, '.gemini', 'settings.json'));
      symlinkSync(join(outside, 'codex'), join(podHome, '.codex'));
      const gemini = await recorded('gemini', { ...pod, HOME: podHome });
      assert.equal(readFileSync(join(outside, 'settings.json'), 'utf8'), '{}');
      assert.match(gemini.log, /settings\.json left as it is: it is a symbolic link/);
      const codex = await recorded('codex', { ...pod, HOME: podHome });
      assert.deepEqual(readdirSync(join(outside, 'codex')), []);
      assert.match(codex.log, /config\.toml not written: Refusing to write into .*\.codex.*: it is a symbolic link/);
      // A folder where codex's config goes: the agent's own placement, the run goes on (not an infra failure).
      const folderHome = join(repo.root, 'pod-home-folder');
      mkdirSync(join(folderHome, '.codex', 'config.toml'), { recursive: true });
      const folder = await recorded('codex', { ...pod, HOME: folderHome });
      assert.match(folder.log, /config\.toml left as it is: it is a folder/);
      assert.equal(folder.lines[0], 'exec', 'the CLI ran');
    });
});

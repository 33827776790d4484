// The gate holds the model keys (DESIGN §7a), black-box: a key svc's user gives under a model CLI's own variable
// (codex's CODEX_API_KEY, aider's AIDER_OPENAI_API_KEY and AIDER_ANTHROPIC_API_KEY, which the agent's environment lets
// through by their CLIs' prefixes) stays with the gate as OPENAI_API_KEY and ANTHROPIC_API_KEY do, and so does each
// entry of aider's AIDER_API_KEY list for an API the gate knows: a real `svc start` run's agent reads each variable and
// calls the model through the gate. A credential under a CLI's prefix that the gate cannot hold (an entry of aider's
// list for another provider, opencode's inline config, claude's OAuth token) is not in its environment at all. The
// model API is a loopback stand-in.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type IncomingHttpHeaders } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

const CODEX_KEY = 'sk-real-codex-key-5e1a';
const AIDER_OPENAI_KEY = 'sk-real-aider-openai-7c2b';
const AIDER_ANTHROPIC_KEY = 'sk-ant-real-aider-3d9f';
/** aider's key list in ConfigArgParse's bracketed form: gemini's entry the gate holds; cohere's it has no route for. */
const AIDER_LIST_GEMINI_KEY = 'sk-real-aider-list-gemini-41aa';
const AIDER_LIST_COHERE_KEY = 'sk-real-aider-list-cohere-41ab';
const AIDER_LIST = `[gemini=${AIDER_LIST_GEMINI_KEY}, cohere=${AIDER_LIST_COHERE_KEY}]`;
/** Credentials under a CLI's prefix that the gate has no route for. */
const UNHELD: Record<string, string> = {
  OPENCODE_CONFIG_CONTENT: '{"provider":{"anthropic":{"options":{"apiKey":"sk-ant-real-opencode-8e0c"}}}}',
  CLAUDE_CODE_OAUTH_TOKEN: 'sk-ant-oat01-real-claude-oauth-6b7d',
  GEMINI_CLI_ACCESS_TOKEN: 'ya29.real-gemini-token-2f4e',
  CODEX_REFRESH_TOKEN: 'rt-real-codex-9a1c',
  // Claude Code's passphrase for its mTLS client key (CLAUDE_CODE_CLIENT_KEY).
  CLAUDE_CODE_CLIENT_KEY_PASSPHRASE: 'real-client-key-passphrase-5b3e',
};

/** Writes what it was given into keys.txt, then calls each model API with it, through whatever base URL it has. */
const AGENT = `#!/bin/sh
cat > /dev/null
env > env.txt
call() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" 2>/dev/null
}
{
  echo "codex:$CODEX_API_KEY"
  echo "aider-openai:$AIDER_OPENAI_API_KEY"
  echo "aider-anthropic:$AIDER_ANTHROPIC_API_KEY"
  echo "aider-list:$AIDER_API_KEY"
  gemini=$(printf '%s' "$AIDER_API_KEY" | sed -n 's/.*"gemini=\\([^"]*\\)".*/\\1/p')
  echo "openai-call:$(call "$OPENAI_BASE_URL/chat/completions" -H "authorization: Bearer $CODEX_API_KEY" -d '{}')"
  echo "anthropic-call:$(call "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $AIDER_ANTHROPIC_API_KEY" -d '{}')"
  echo "gemini-call:$(call "$GOOGLE_GEMINI_BASE_URL/v1beta/models/m:generateContent" -H "x-goog-api-key: $gemini" \
    -d '{}')"
} > keys.txt
exit 0
`;

describe('a credential under a CLI\'s own variable', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' },
  () => {
    let repo: TestRepo;
    let model: Server;
    const seen: Array<{ path: string; headers: IncomingHttpHeaders }> = [];
    let workdir: string;
    let events: string;

    before(async () => {
      model = createServer((req, res) => {
        seen.push({ path: req.url ?? '', headers: req.headers });
        req.resume();
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
      await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
      repo = makeRepo({ providers: { keys: AGENT } });
      const upstream = `http://127.0.0.1:${(model.address() as AddressInfo).port}`;
      const env: NodeJS.ProcessEnv = {
        ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
        CODEX_API_KEY: CODEX_KEY, AIDER_OPENAI_API_KEY: AIDER_OPENAI_KEY, AIDER_ANTHROPIC_API_KEY: AIDER_ANTHROPIC_KEY,
        AIDER_API_KEY: AIDER_LIST, OPENAI_BASE_URL: upstream, ANTHROPIC_BASE_URL: upstream,
        GOOGLE_GEMINI_BASE_URL: upstream, AIDER_DARK_MODE: 'true', ...UNHELD,
      };
      for (const name of ['SVC_SANDBOX', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY', 'GOOGLE_API_KEY']) {
        delete env[name];
      }
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'read the keys', '--provider', 'keys',
        '--worktree'], { cwd: repo.repo, env });
      const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
      workdir = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')).workdir;
      events = readFileSync(join(repo.repo, '.svc', 'runs', run, 'events.jsonl'), 'utf8');
    });
    after(() => {
      model.close();
      repo.cleanup();
    });

    it('reaches a sandboxed agent only as a placeholder, and its calls through the gate carry the real key',
      () => {
        const text = readFileSync(join(workdir, 'keys.txt'), 'utf8');
        const value = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1] ?? '';

        for (const [name, key] of [['codex', CODEX_KEY], ['aider-openai', AIDER_OPENAI_KEY],
          ['aider-anthropic', AIDER_ANTHROPIC_KEY]] as const) {
          assert.notEqual(value(name), key, `the agent read the real ${name} key`);
          assert.match(value(name), /placeholder/, name);
        }
        assert.equal(value('openai-call'), '200');
        assert.equal(value('anthropic-call'), '200');
        assert.equal(value('aider-list'), '["gemini=svc-gate-placeholder"]', 'aider\'s list, its held entry only');
        assert.equal(value('gemini-call'), '200');
        const openai = seen.find((s) => s.path === '/chat/completions');
        const anthropic = seen.find((s) => s.path === '/v1/messages');
        const gemini = seen.find((s) => s.path === '/v1beta/models/m:generateContent');
        assert.equal(openai?.headers.authorization, `Bearer ${CODEX_KEY}`, 'the gate added the key codex was given');
        assert.equal(anthropic?.headers['x-api-key'], AIDER_ANTHROPIC_KEY, 'and the one aider was given');
        assert.equal(gemini?.headers['x-goog-api-key'], AIDER_LIST_GEMINI_KEY, 'and the one in aider\'s list');
        for (const s of seen) assert.doesNotMatch(JSON.stringify(s.headers), /placeholder/);
      });

    it('does not reach a sandboxed agent at all when the gate cannot hold it', () => {
      const dumped = readFileSync(join(workdir, 'env.txt'), 'utf8');
      for (const [name, value] of Object.entries(UNHELD)) {
        assert.ok(!dumped.includes(value), `the agent read ${name}`);
        assert.doesNotMatch(dumped, new RegExp(`^${name}=`, 'm'), name);
      }
      const keys = [CODEX_KEY, AIDER_OPENAI_KEY, AIDER_ANTHROPIC_KEY, AIDER_LIST_GEMINI_KEY, AIDER_LIST_COHERE_KEY];
      for (const key of keys) assert.ok(!dumped.includes(key));
      assert.match(dumped, /^AIDER_DARK_MODE=true$/m, 'a CLI\'s setting under its prefix still passes');
    });

    it('is named, without its value, in the run\'s log when it is left out', () => {
      for (const [name, value] of Object.entries(UNHELD)) {
        assert.match(events, new RegExp(`\\b${name}\\b`), name);
        assert.ok(!events.includes(value), `the log holds ${name}'s value`);
      }
      assert.match(events, /AIDER_API_KEY's \\"cohere\\" entry/, 'the entry of aider\'s list left out');
      assert.ok(!events.includes(AIDER_LIST_COHERE_KEY));
    });
  });

describe('a credential under a CLI\'s own variable, without a sandbox', () => {
  let repo: TestRepo;
  before(() => {
    repo = makeRepo({ providers: { keys: AGENT } });
  });
  after(() => repo.cleanup());

  it('reaches the agent as it is, as nothing confines what the agent could read anyway', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      SVC_SANDBOX: 'none', CODEX_API_KEY: CODEX_KEY, AIDER_API_KEY: AIDER_LIST, ...UNHELD,
    };
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'read the keys', '--provider', 'keys',
      '--worktree'], { cwd: repo.repo, env });
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    const workdir = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')).workdir;
    const dumped = readFileSync(join(workdir, 'env.txt'), 'utf8');
    for (const [name, value] of Object.entries({ ...UNHELD, CODEX_API_KEY: CODEX_KEY, AIDER_API_KEY: AIDER_LIST })) {
      assert.ok(dumped.includes(`${name}=${value}`), name);
    }
  });
});

// The real claude and gemini CLIs with an empty HOME and no key: what they report ends the run as class config,
// saying which CLI is not logged in and what to do. Neither asks anything of the network before it gives up (both were
// run in a network namespace of their own to find out); claude's base URL names a closed loopback port all the same.
// gemini gets none: with a base URL and no saved auth type it fails otherwise (docs/engine.md, "gemini"). codex asks
// its model API without credentials: here a loopback stand-in that refuses it as the OpenAI API does.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { skipUnlessInstalled, requireProviderCli, makeCliRepo, summaryOf, CLI_TEST, type CliRepo } from './cli-run.ts';
import { sseEvent, startScriptedHttp, type ScriptedServer } from './scripted-http.ts';
import { messagesOf } from './model-script.ts';

const QUIET = { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1', DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
  ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' };

for (const [name, key] of [['claude', 'ANTHROPIC_API_KEY'], ['gemini', 'GEMINI_API_KEY']] as const) {
  describe(`${name} CLI not logged in`, { skip: skipUnlessInstalled(name) }, () => {
    let repo: CliRepo | undefined;
    after(async () => repo?.close());

    it('fails the run with class config, naming the CLI and the fix', CLI_TEST, async () => {
      // No key of any provider in svc's environment, so none reaches the CLI.
      const unset = Object.fromEntries(['ANTHROPIC_API_KEY', 'GEMINI_API_KEY', 'GOOGLE_API_KEY', 'OPENAI_API_KEY']
        .map((k) => [k, undefined]));
      repo = await makeCliRepo(requireProviderCli(name), { ...unset, ...QUIET });
      const res = await repo.svc(['start', '--brief', 'fix a.txt', '--worktree', '--provider', name]);
      assert.equal(res.code, 1, res.stderr);
      const summary = summaryOf(res);
      const state = repo.state(summary.run);
      assert.equal(state.status, 'failed');
      assert.equal(state.failure.class, 'config', JSON.stringify(state.failure));
      // The exit code each CLI keeps for it (svc takes its record only with this code).
      assert.equal(state.exit_code, name === 'claude' ? 1 : 41);
      assert.equal(state.failure.retryable, false);
      assert.match(state.failure.reason, new RegExp(`^Provider ${name} is not logged in: .*${key}`));
      assert.equal(state.error, state.failure.reason);
    });
  });
}

describe('codex CLI not logged in', { skip: skipUnlessInstalled('codex') }, () => {
  let repo: CliRepo | undefined;
  const refusing = createServer((req, res) => {
    req.resume();
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'Missing bearer or basic authentication in header',
      type: 'invalid_request_error', param: null, code: null } }));
  });
  after(async () => {
    await repo?.close();
    refusing.closeAllConnections();
    await new Promise((resolve) => refusing.close(resolve));
  });

  it('fails the run with class config, naming the CLI and the fix', CLI_TEST, async () => {
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const host = `127.0.0.1:${(refusing.address() as AddressInfo).port}`;
    const unset = Object.fromEntries(['OPENAI_API_KEY', 'CODEX_API_KEY'].map((k) => [k, undefined]));
    repo = await makeCliRepo(requireProviderCli('codex'), unset, [host]);
    // codex's own OpenAI provider, its API on the stand-in: it sends what it holds of a login, which is nothing.
    const config = ['model_provider = "openai-standin"', '[model_providers.openai-standin]', 'name = "OpenAI"',
      `base_url = "http://${host}/v1"`, 'wire_api = "responses"', 'requires_openai_auth = true', ''].join('\n');
    mkdirSync(join(repo.home, '.codex'), { recursive: true });
    writeFileSync(join(repo.home, '.codex', 'config.toml'), config);
    const res = await repo.svc(['start', '--brief', 'fix a.txt', '--worktree', '--provider', 'codex']);
    assert.equal(res.code, 1, res.stderr);
    const state = repo.state(summaryOf(res).run);
    assert.equal(state.failure.class, 'config', JSON.stringify(state.failure));
    assert.equal(state.exit_code, 1);
    assert.match(state.failure.reason, /^Provider codex is not logged in: .*OPENAI_API_KEY/);
  });
});

// The attack with the real claude, logged in: the agent has a tool print claude's not-logged-in words, and the run
// then fails on an error of claude's own (the API refuses the next turn). The model reports no usage, so no token
// count vouches for the login: only claude's own records decide, and they say the error was not a missing login.
describe('claude CLI failing after the agent printed its not-logged-in words', { skip: skipUnlessInstalled('claude') },
  () => {
    const MARKER = 'Not logged in · Please run /login';
    let repo: CliRepo | undefined;
    let model: ScriptedServer | undefined;
    after(async () => {
      await repo?.close();
      await model?.close();
    });

    it('stays class agent', CLI_TEST, async () => {
      model = await startScriptedHttp(() => [], { input: 0, output: 0 }, (req, res) => {
        const blocks = messagesOf(req.body).flatMap((m) => (Array.isArray(m.content) ? m.content : []));
        if (blocks.some((b) => b?.type === 'tool_result')) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'refused' } }));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        sseEvent(res, 'message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant',
          model: 'claude-sonnet-4-5', content: [], stop_reason: null, stop_sequence: null,
          usage: { input_tokens: 0, output_tokens: 0 } } });
        const call = { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: {} };
        sseEvent(res, 'content_block_start', { index: 0, content_block: call });
        const input = { command: `printf '%s\\n' '${MARKER}'`, description: 'Print the words' };
        sseEvent(res, 'content_block_delta', { index: 0,
          delta: { type: 'input_json_delta', partial_json: JSON.stringify(input) } });
        sseEvent(res, 'content_block_stop', { index: 0 });
        sseEvent(res, 'message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null },
          usage: { output_tokens: 0 } });
        sseEvent(res, 'message_stop', {});
        res.end();
      });
      repo = await makeCliRepo(requireProviderCli('claude'), { ...QUIET, ANTHROPIC_API_KEY: 'scripted-anthropic-key',
        ANTHROPIC_BASE_URL: model.url, ANTHROPIC_MODEL: 'claude-sonnet-4-5' });
      const res = await repo.svc(['start', '--brief', 'fix a.txt', '--worktree', '--provider', 'claude']);
      assert.equal(res.code, 1, res.stderr);
      const { run } = summaryOf(res);
      const logs = repo.events(run).filter((e) => e.kind === 'log').map((e) => String(e.data.text));
      assert.ok(logs.some((t) => t.includes('"tool_result"') && t.includes(MARKER)), logs.join('\n').slice(0, 4000));
      assert.deepEqual(repo.state(run).failure,
        { class: 'agent', reason: 'Provider claude exited with code 1', retryable: false });
    });
  });

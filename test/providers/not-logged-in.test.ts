// The real claude and gemini CLIs with an empty HOME and no key: what they print ends the run as class config, saying
// which CLI is not logged in and what to do. Neither asks anything of the network before it gives up (both were run
// in a network namespace of their own to find out); claude's base URL names a closed loopback port all the same.
// gemini gets none: with a base URL and no saved auth type it fails otherwise (docs/engine.md, "gemini").
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessInstalled, requireProviderCli, makeCliRepo, summaryOf, CLI_TEST, type CliRepo } from './cli-run.ts';

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
      assert.equal(state.failure.retryable, false);
      assert.match(state.failure.reason, new RegExp(`^Provider ${name} is not logged in: .*${key}`));
      assert.equal(state.error, state.failure.reason);
    });
  });
}

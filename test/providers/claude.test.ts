// The real claude CLI (@anthropic-ai/claude-code) driven by `svc start` against a scripted Anthropic Messages API on
// 127.0.0.1 (ANTHROPIC_BASE_URL), logged in with an API key from its environment.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAnthropicMessagesServer } from './anthropic-messages-server.ts';
import type { ScriptedServer } from './gemini-model-server.ts';
import { skipUnlessInstalled, requireProviderCli, makeCliRepo, CLI_TEST } from './cli-run.ts';
import { fixTheTest, SUMMARY, type CliRepo } from './cli-run.ts';
import { assertKeyOnlyAtTheGate, assertNoSecretSent, assertTaskFenced, verifiedFixRun } from './conformance.ts';
import { assertSessionKeptPerRepository, blockedThenAnswered, stopLeavesNothing } from './conformance.ts';
import { sessionGoneThenSummary } from './conformance.ts';

const skip = skipUnlessInstalled('claude');
const KEY = 'scripted-anthropic-key';
/** A model whose list price claude 2.1 knows: USD per million tokens in and out. */
const MODEL = 'claude-sonnet-4-5';
const PRICE = { input: 3, output: 15 };

describe('claude CLI end to end', { skip }, () => {
  let server: ScriptedServer;
  let repo: CliRepo;

  before(async () => {
    server = await startAnthropicMessagesServer(fixTheTest());
    // An API key from the environment is a login claude accepts headless; nothing but the scripted server is
    // contacted (no telemetry, error reports, update checks or other non-essential traffic).
    const env = {
      ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: server.url, ANTHROPIC_MODEL: MODEL,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1', DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
    };
    repo = await makeCliRepo(requireProviderCli('claude'), env);
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  const fixes = 'fixes the failing test with its own tools: verified PR, receipt verifies, tokens and cost';
  it(fixes, CLI_TEST, async () => {
    const { state, logs } = await verifiedFixRun(repo, 'claude');
    // Each tool ran in the worktree and succeeded: Read, Edit, then the test through Bash.
    const blocks = server.requests.flatMap((r) => (r.body as any)?.messages ?? []).flatMap((m: any) => m.content);
    const results = blocks.filter((b: any) => b?.type === 'tool_result');
    const last = server.requests.at(-1)!.body as any;
    const lastResults = last.messages.flatMap((m: any) => m.content).filter((b: any) => b?.type === 'tool_result');
    assert.equal(lastResults.length, 3, JSON.stringify(lastResults));
    assert.ok(results.every((b: any) => b.is_error !== true), JSON.stringify(results));
    assert.match(JSON.stringify(lastResults[1]), /has been updated successfully/);
    // Tokens are what the server reported; cost is what claude priced them at (its list price for MODEL).
    const tokens = { in: state.tokens_in, out: state.tokens_out };
    assert.deepEqual(tokens, { in: server.usage.input, out: server.usage.output });
    const cost = (server.usage.input * PRICE.input + server.usage.output * PRICE.output) / 1e6;
    assert.ok(Math.abs(state.cost_usd - cost) < 1e-12, `${state.cost_usd} vs ${cost}`);
    // The gate metered every call from the API's own streamed usage; claude's own figure is kept as reported.
    assert.equal(state.metered?.calls, server.requests.length, JSON.stringify(state.metered));
    assert.ok(Math.abs(state.metered.cost_usd - cost) < 1e-12, `${state.metered.cost_usd} vs ${cost}`);
    assert.ok(Math.abs(state.reported.cost_usd - cost) < 1e-12, `${state.reported.cost_usd} vs ${cost}`);
    // The run's log shows the CLI's own stream: its tool calls as they happened, and the result with the summary.
    assert.ok(logs.some((t) => t.includes('"name":"Edit"')), logs.slice(0, 20).join('\n'));
    assert.ok(logs.some((t) => t.includes('"type":"result"') && t.includes(SUMMARY)));
    // What the CLI sent: the task fenced as untrusted data, the key it was given, none of svc's secrets.
    assertTaskFenced(server);
    assertNoSecretSent(server);
    assert.ok(server.requests.every((r) => r.path.startsWith('/v1/messages')));
    assertKeyOnlyAtTheGate(server, repo.home, KEY, 'x-api-key');
    // Its transcript is the repository's, kept in its provider home; the user's ~/.claude got nothing.
    assertSessionKeptPerRepository(repo.home, 'claude', /^\.claude\/projects\/.+\.jsonl$/, ['.claude'], []);
  });

  it('asks through $SVC_QUESTION_FILE, blocks, and finishes once svc answer re-invokes it', CLI_TEST, async () => {
    await blockedThenAnswered(repo, server, 'claude');
  });

  it('its session gone while the run waits: a fresh session with the earlier conversation summarised', CLI_TEST,
    async () => {
      await sessionGoneThenSummary(repo, server, 'claude');
    });

  it('stop during a long Bash command leaves nothing running', CLI_TEST, async () => {
    await stopLeavesNothing(repo, server, 'claude');
  });
});

// The real opencode CLI (opencode-ai) driven by `svc start` against a scripted OpenAI-compatible chat completions API
// on 127.0.0.1, configured as a custom provider in the user's opencode.json.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startChatCompletionsServer, type ChatServer } from './chat-completions-server.ts';
import { skipUnlessInstalled, requireProviderCli, makeCliRepo, CLI_TEST } from './cli-run.ts';
import { fixTheTest, SUMMARY, type CliRepo } from './cli-run.ts';
import { assertNoSecretSent, assertTaskFenced, verifiedFixRun } from './conformance.ts';
import { assertSessionKeptPerRepository, blockedThenAnswered, stopLeavesNothing } from './conformance.ts';
import { sessionGoneThenSummary } from './conformance.ts';

const skip = skipUnlessInstalled('opencode');
/** USD per million tokens, as the model entry in opencode.json prices it; opencode reports cost from these. */
const PRICE = { input: 1, output: 2 };

describe('opencode CLI end to end', { skip }, () => {
  let server: ChatServer;
  let repo: CliRepo;

  before(async () => {
    server = await startChatCompletionsServer(fixTheTest());
    // No model catalog fetch, update check, plugin install or LSP download: only the scripted server is contacted.
    const offline = {
      OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
      OPENCODE_DISABLE_LSP_DOWNLOAD: '1', OPENCODE_DISABLE_SHARE: '1',
    };
    repo = await makeCliRepo(requireProviderCli('opencode'), offline, [new URL(server.url).host]);
    const scripted = {
      npm: '@ai-sdk/openai-compatible',
      name: 'Scripted',
      options: { baseURL: `${server.url}/v1`, apiKey: 'scripted-opencode-key' },
      models: { m1: { name: 'Scripted model', cost: PRICE } },
    };
    const config = { provider: { scripted }, model: 'scripted/m1', autoupdate: false, share: 'disabled' };
    mkdirSync(join(repo.home, '.config', 'opencode'), { recursive: true });
    writeFileSync(join(repo.home, '.config', 'opencode', 'opencode.json'), JSON.stringify(config));
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  const fixes = 'fixes the failing test with its own tools: verified PR, receipt verifies, tokens and cost';
  it(fixes, CLI_TEST, async () => {
    // opencode works in the worktree only because PWD names it: without, its edit tool changed the main checkout.
    const { state, logs } = await verifiedFixRun(repo, 'opencode');
    const messages = server.requests.flatMap((r) => (r.body as any)?.messages ?? []);
    const toolResults = messages.filter((m: any) => m.role === 'tool').map((m: any) => JSON.stringify(m.content));
    assert.ok(toolResults.some((t: string) => /Edit applied/.test(t)), toolResults.join('\n'));
    // Tokens are the agent turns' usage (opencode leaves its session-title request out); cost is opencode's pricing.
    const figures = { in: state.tokens_in, out: state.tokens_out };
    assert.deepEqual(figures, { in: server.agentUsage.input, out: server.agentUsage.output });
    const cost = (server.agentUsage.input * PRICE.input + server.agentUsage.output * PRICE.output) / 1e6;
    assert.ok(Math.abs(state.cost_usd - cost) < 1e-12, `${state.cost_usd} vs ${cost}`);
    assert.ok(logs.some((t) => t.includes('"type":"step_finish"')) && logs.some((t) => t.includes(SUMMARY)));
    // What the CLI sent: the task fenced as untrusted data (in the task file opencode read), none of svc's secrets.
    assertTaskFenced(server);
    assertNoSecretSent(server);
    // Its session database is the repository's, kept in its provider home; the user's folders got nothing new.
    assertSessionKeptPerRepository(repo.home, 'opencode', /^\.local\/share\/opencode\/.+/,
      ['.config/opencode', '.local/share/opencode', '.local/state/opencode'], ['.config/opencode/opencode.json']);
    assert.ok(server.requests.every((r) => r.headers.authorization === 'Bearer scripted-opencode-key'));
  });

  it('asks through $SVC_QUESTION_FILE, blocks, and finishes once svc answer re-invokes it', CLI_TEST, async () => {
    await blockedThenAnswered(repo, server, 'opencode');
  });

  it('its session gone while the run waits: a fresh session with the earlier conversation summarised', CLI_TEST,
    async () => {
      await sessionGoneThenSummary(repo, server, 'opencode');
    });

  it('stop during a long shell command leaves nothing running', CLI_TEST, async () => {
    await stopLeavesNothing(repo, server, 'opencode');
  });
});

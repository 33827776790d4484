// The real gemini CLI (@google/gemini-cli) driven by `svc start` against a scripted Gemini API on 127.0.0.1.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGeminiModelServer, type ScriptedServer } from './gemini-model-server.ts';
import { skipUnlessInstalled, requireProviderCli, makeCliRepo, CLI_TEST } from './cli-run.ts';
import { fixTheTest, SUMMARY, type CliRepo } from './cli-run.ts';
import { assertKeyOnlyAtTheGate, assertNoSecretSent, assertTaskFenced, verifiedFixRun } from './conformance.ts';
import { assertSessionKeptPerRepository, blockedThenAnswered, stopLeavesNothing } from './conformance.ts';
import { sessionGoneThenSummary } from './conformance.ts';

const skip = skipUnlessInstalled('gemini');

describe('gemini CLI end to end', { skip }, () => {
  let server: ScriptedServer;
  let repo: CliRepo;

  before(async () => {
    server = await startGeminiModelServer(fixTheTest());
    const env = { GEMINI_API_KEY: 'scripted-gemini-key', GOOGLE_GEMINI_BASE_URL: server.url };
    repo = await makeCliRepo(requireProviderCli('gemini'), env);
    // A user who never chose an auth type (gemini's dialog saves one): with GOOGLE_GEMINI_BASE_URL set and no choice
    // saved, gemini 0.61 picks its "gateway" auth type and refuses it headless, so svc's run settings choose the key.
    mkdirSync(join(repo.home, '.gemini'), { recursive: true });
    // Usage statistics and update checks off: nothing but the scripted server is contacted.
    const settings = {
      privacy: { usageStatisticsEnabled: false },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    };
    writeFileSync(join(repo.home, '.gemini', 'settings.json'), JSON.stringify(settings));
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  const fixes = 'fixes the failing test with its own tools: verified PR, receipt verifies, tokens as reported';
  it(fixes, CLI_TEST, async () => {
    const { state, logs } = await verifiedFixRun(repo, 'gemini');
    // The edit came through gemini's tools, in the worktree: read_file, replace, then the test through its shell.
    const contents = server.requests.flatMap((r) => (r.body as any)?.contents ?? []);
    const responses = contents.flatMap((c: any) => c.parts ?? []);
    const tools = responses.filter((p: any) => p.functionResponse).map((p: any) => p.functionResponse.name);
    assert.deepEqual(tools, ['read_file', 'read_file', 'replace', 'read_file', 'replace', 'run_shell_command']);
    // Tokens on the run are what the server reported through the CLI (gemini prints no price).
    const figures = { in: state.tokens_in, out: state.tokens_out, usd: state.cost_usd };
    assert.deepEqual(figures, { in: server.usage.input, out: server.usage.output, usd: null });
    // The run's log shows the CLI's own output (its JSON result with the model's summary).
    assert.ok(logs.some((t) => t.includes(SUMMARY)), logs.slice(0, 20).join('\n'));
    // What the CLI sent: the task fenced as untrusted data, and none of svc's secrets.
    assertTaskFenced(server);
    assertNoSecretSent(server);
    assertKeyOnlyAtTheGate(server, repo.home, 'scripted-gemini-key', 'x-goog-api-key');
    // Its chat is the repository's, kept in its provider home; the user's ~/.gemini still holds only its settings.
    assertSessionKeptPerRepository(repo.home, 'gemini', /^\.gemini\/tmp\/.+/, ['.gemini'], ['.gemini/settings.json']);
    assert.ok(server.requests.every((r) => r.headers['x-goog-api-key'] === 'scripted-gemini-key'));
  });

  it('asks through $SVC_QUESTION_FILE, blocks, and finishes once svc answer re-invokes it', CLI_TEST, async () => {
    await blockedThenAnswered(repo, server, 'gemini');
  });

  it('its session gone while the run waits: a fresh session with the earlier conversation summarised', CLI_TEST,
    async () => {
      await sessionGoneThenSummary(repo, server, 'gemini');
    });

  it('stop during a long shell command leaves nothing running', CLI_TEST, async () => {
    await stopLeavesNothing(repo, server, 'gemini');
  });
});

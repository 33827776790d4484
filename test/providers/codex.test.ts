// The real codex CLI (@openai/codex) driven by `svc start` against a scripted OpenAI Responses API on 127.0.0.1,
// configured as a custom model provider in the user's ~/.codex/config.toml.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startResponsesServer } from './responses-server.ts';
import type { ScriptedServer } from './gemini-model-server.ts';
import { skipUnlessInstalled, requireProviderCli, makeCliRepo, CLI_TEST } from './cli-run.ts';
import { fixTheTest, BROKEN, SUMMARY, type CliRepo } from './cli-run.ts';
import { assertKeyOnlyAtTheGate, assertNoSecretSent, assertTaskFenced, verifiedFixRun } from './conformance.ts';
import { assertSessionKeptPerRepository, blockedThenAnswered, stopLeavesNothing } from './conformance.ts';
import { sessionGoneThenSummary } from './conformance.ts';

const skip = skipUnlessInstalled('codex');
const KEY = 'scripted-codex-key';

describe('codex CLI end to end', { skip }, () => {
  let server: ScriptedServer;
  let repo: CliRepo;

  before(async () => {
    server = await startResponsesServer(fixTheTest());
    repo = await makeCliRepo(requireProviderCli('codex'), { SCRIPTED_API_KEY: KEY }, [new URL(server.url).host]);
    // A model codex 0.169 has metadata for (an unknown one gets no apply_patch tool), served by a custom provider
    // that speaks the Responses API and takes its key from SCRIPTED_API_KEY.
    const config = [
      'model = "gpt-5.5"',
      'model_provider = "scripted"',
      '[model_providers.scripted]',
      'name = "Scripted"',
      `base_url = "${server.url}/v1"`,
      'wire_api = "responses"',
      'env_key = "SCRIPTED_API_KEY"',
      '',
    ].join('\n');
    mkdirSync(join(repo.home, '.codex'), { recursive: true });
    writeFileSync(join(repo.home, '.codex', 'config.toml'), config);
    // SCRIPTED_API_KEY is no provider's documented variable: the agent gets it only because the operator lists it.
    // Beside the network grant makeCliRepo wrote there (the scripted API is a loopback address).
    const operatorFile = join(repo.home, '.svc', 'operator.json');
    const operator = JSON.parse(readFileSync(operatorFile, 'utf8'));
    writeFileSync(operatorFile, JSON.stringify({ ...operator, env: ['SCRIPTED_API_KEY'] }));
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  const fixes = 'fixes the failing test with its own tools: verified PR, receipt verifies, tokens as reported';
  it(fixes, CLI_TEST, async () => {
    const { state, logs } = await verifiedFixRun(repo, 'codex');
    // Each tool ran in the worktree: exec_command read a.txt, apply_patch edited it, exec_command ran the test.
    const last = server.requests.at(-1)!.body as any;
    const outputs = last.input.filter((i: any) => /_call_output$/.test(i.type)).map((i: any) => String(i.output));
    assert.equal(outputs.length, 3, outputs.join('\n---\n'));
    assert.match(outputs[0]!, new RegExp(`exited with code 0[\\s\\S]*Output:\\n${BROKEN}\\n`));
    assert.doesNotMatch(outputs[1]!, /Failed|Exit code: [1-9]/);
    assert.match(outputs[2]!, /exited with code 0/);
    // Tokens are what the server reported through codex's turn.completed; codex prints no price.
    const figures = { in: state.tokens_in, out: state.tokens_out, usd: state.cost_usd };
    assert.deepEqual(figures, { in: server.usage.input, out: server.usage.output, usd: null });
    // The run's log shows codex's own JSONL: the patch it applied and its final message.
    assert.ok(logs.some((t) => t.includes('"type":"file_change"')), logs.slice(0, 20).join('\n'));
    assert.ok(logs.some((t) => t.includes('"type":"agent_message"') && t.includes(SUMMARY)));
    // What the CLI sent: the task fenced as untrusted data, the key it was given, none of svc's secrets.
    assertTaskFenced(server);
    assertNoSecretSent(server);
    // Its session is the repository's, kept in its provider home; the user's ~/.codex still holds only its config.
    assertSessionKeptPerRepository(repo.home, 'codex', /^\.codex\/sessions\/.+\.jsonl$/, ['.codex'],
      ['.codex/config.toml']);
    assert.ok(server.requests.every((r) => r.headers.authorization === `Bearer ${KEY}` && r.path === '/v1/responses'));
  });

  it('asks through $SVC_QUESTION_FILE, blocks, and finishes once svc answer re-invokes it', CLI_TEST, async () => {
    await blockedThenAnswered(repo, server, 'codex');
  });

  it('its session gone while the run waits: a fresh session with the earlier conversation summarised', CLI_TEST,
    async () => {
      await sessionGoneThenSummary(repo, server, 'codex');
    });

  it('stop during a long exec_command leaves nothing running', CLI_TEST, async () => {
    await stopLeavesNothing(repo, server, 'codex');
  });
});

// The way a user with an OpenAI key meets codex: svc holds the key (OPENAI_API_KEY; OPENAI_BASE_URL moves the gate's
// upstream to the scripted API) and codex, with no provider of its own configured, must call the gate. codex 0.169
// reads no OPENAI_BASE_URL: told only by its environment, it tunnelled to api.openai.com and the server saw nothing.
describe('codex CLI through svc\'s gate with the key svc holds', { skip }, () => {
  const REAL = 'sk-scripted-openai-real';
  let server: ScriptedServer;
  let repo: CliRepo;

  before(async () => {
    server = await startResponsesServer(fixTheTest());
    const env = { OPENAI_API_KEY: REAL, OPENAI_BASE_URL: `${server.url}/v1` };
    repo = await makeCliRepo(requireProviderCli('codex'), env);
    // A model codex 0.169 has metadata for, from the built-in OpenAI provider.
    mkdirSync(join(repo.home, '.codex'), { recursive: true });
    writeFileSync(join(repo.home, '.codex', 'config.toml'), 'model = "gpt-5.5"\n');
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  const through = 'calls the model through the gate: verified PR, the real key only at the server, its config kept';
  it(through, CLI_TEST, async () => {
    await verifiedFixRun(repo, 'codex');
    assert.ok(server.requests.every((r) => r.path === '/v1/responses'), server.requests.map((r) => r.path).join());
    assertKeyOnlyAtTheGate(server, repo.home, REAL, 'authorization');
    assertNoSecretSent(server);
    assert.equal(readFileSync(join(repo.home, '.codex', 'config.toml'), 'utf8'), 'model = "gpt-5.5"\n');
  });
});
